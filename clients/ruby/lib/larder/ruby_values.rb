# frozen_string_literal: true

require "msgpack"
require_relative "serializers"

module Larder
  # Ruby objects in larder entries, for ActiveSupport's cache store.
  #
  # A value every language can read (nil, booleans, Integers in 64 bits, Floats, UTF-8 or binary Strings, Arrays,
  # Hashes with String keys) is written as plain MessagePack, byte for byte what the other languages write. Anything
  # else (Symbols, Time, ActiveRecord models, Hashes with Symbol keys…) is written as one MessagePack ext object of
  # type RUBY_MARSHAL (101) holding `Marshal.dump(value)`: other languages read an ext value they display as
  # `{"$ext":101,…}` and do not misread, and Ruby restores the object.
  module RubyValues
    RUBY_MARSHAL = 101
    INT_RANGE = -(2**63)..((2**64) - 1)

    FACTORY = MessagePack::Factory.new.tap do |factory|
      factory.register_type(RUBY_MARSHAL, Object, packer: ->(_) { raise "unused" },
                                                  unpacker: ->(data) { Marshal.load(data) }) # rubocop:disable Security/MarshalLoad
    end

    module_function

    # The msgpack payload of `value`.
    def dump(value)
      return MessagePack.pack(value) if plain?(value)

      MessagePack.pack(MessagePack::ExtensionValue.new(RUBY_MARSHAL, Marshal.dump(value)))
    end

    # The value of a msgpack payload (a Ruby object for ext RUBY_MARSHAL). Raises InvalidEntry.
    def load(payload)
      value = Serializers.msgpack_value(payload)
      return value unless value.is_a?(MessagePack::ExtensionValue) && value.type == RUBY_MARSHAL

      Marshal.load(value.payload) # rubocop:disable Security/MarshalLoad
    rescue TypeError, ArgumentError => e
      raise InvalidEntry.new("bad_value", "Ruby Marshal ext: #{e.message}")
    end

    # Whether every language reads `value` as Ruby wrote it (iterative, bounded by the nesting limit).
    def plain?(value)
      stack = [[value, 0]]
      until stack.empty?
        item, depth = stack.pop
        case item
        when nil, true, false, Float then next
        when Integer then return false unless INT_RANGE.cover?(item)
        when String then return false unless plain_string?(item)
        when Array
          return false if depth >= Serializers::MAX_NESTING || item.class != Array

          item.each { |child| stack.push([child, depth + 1]) }
        when Hash
          return false if depth >= Serializers::MAX_NESTING || item.class != Hash || item.default || item.default_proc

          item.each do |key, child|
            return false unless key.is_a?(String) && plain_string?(key)

            stack.push([child, depth + 1])
          end
        else return false
        end
      end
      true
    end

    def plain_string?(text)
      return false unless text.instance_of?(String)
      return true if text.encoding == Encoding::BINARY

      (text.encoding == Encoding::UTF_8 || text.encoding == Encoding::US_ASCII) && text.valid_encoding?
    end
  end
end
