# frozen_string_literal: true

require "msgpack"
require_relative "serializers"
require_relative "signed_ext"

module Larder
  # Ruby objects in larder entries, for ActiveSupport's cache store.
  #
  # A value every language can read (nil, booleans, Integers in 64 bits, Floats, UTF-8 or binary Strings, Arrays,
  # Hashes with String keys) is written as plain MessagePack, byte for byte what the other languages write. Anything
  # else (Symbols, Time, ActiveRecord models, Hashes with Symbol keys…) is written as one MessagePack ext object of
  # type RUBY_MARSHAL (101) holding `Marshal.dump(value)`, signed with the application's secret (SignedExt,
  # spec/FORMAT.md §2): other languages read an ext value they display as `{"$ext":101,…}` and do not misread, and
  # Ruby restores the object, but only from bytes its application signed. Without a signer, Marshal is off.
  module RubyValues
    RUBY_MARSHAL = 101
    INT_RANGE = -(2**63)..((2**64) - 1)

    module_function

    # The msgpack payload of `value`. `signer` (a SignedExt, or nil when Marshal is off) signs the Marshal dump of a
    # value that is not plain; `marshal`: :when_needed (plain values as MessagePack), :always, or :never (a value
    # that is not plain raises MarshalDisabled). `off` says, in MarshalDisabled's message, how to turn Marshal on.
    def dump(value, signer:, marshal: :when_needed, off: nil)
      return MessagePack.pack(value) if marshal != :always && plain?(value)
      raise MarshalDisabled, "#{value.class} is not plain MessagePack and #{off}" if marshal == :never || signer.nil?

      data = signer.sign(RUBY_MARSHAL, Marshal.dump(value))
      MessagePack.pack(MessagePack::ExtensionValue.new(RUBY_MARSHAL, data))
    end

    # `dump`'s payload as the parts Larder.encode_serialized takes: a plain String as its MessagePack head and its
    # own bytes (so a large one is copied once, into the entry), anything else as dump's one String.
    def dump_parts(value, signer:, marshal: :when_needed, off: nil)
      return [Serializers.string_head(value), value.b] if marshal != :always && plain_string?(value)

      [dump(value, signer: signer, marshal: marshal, off: off)]
    end

    # The value of a msgpack payload; for a top-level ext RUBY_MARSHAL, the Ruby object, when `signer` verifies it
    # and `marshal` is true. Raises InvalidEntry for a payload that is not MessagePack, SignedExt::Refused for an
    # ext 101 value it will not load (the caller reads a miss). Marshal.load never sees unsigned bytes.
    def load(payload, signer:, marshal: true)
      value = Serializers.msgpack_value(payload)
      return value unless value.is_a?(MessagePack::ExtensionValue) && value.type == RUBY_MARSHAL
      raise SignedExt::Refused, "marshal_free" unless marshal
      raise SignedExt::Refused, "no_secret" if signer.nil?

      dump = signer.verify(RUBY_MARSHAL, value.payload)
      begin
        Marshal.load(dump) # rubocop:disable Security/MarshalLoad -- signed by this application (SignedExt)
      rescue StandardError
        raise SignedExt::Refused, "unreadable"
      end
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
