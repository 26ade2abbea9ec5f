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
    # What plain? does with a value of each class (exactly that class: subclasses are not plain).
    KINDS = { String => :string, Hash => :hash, Array => :array, NilClass => :scalar, TrueClass => :scalar,
              FalseClass => :scalar, Float => :scalar, Integer => :integer }.compare_by_identity.freeze
    # The encodings of a plain String (valid ones: binary is always valid).
    PLAIN_ENCODINGS = { Encoding::UTF_8 => true, Encoding::US_ASCII => true, Encoding::BINARY => true }
                      .compare_by_identity.freeze

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

    # Whether every language reads `value` as Ruby wrote it. A walk over every element cannot be avoided (the gem
    # would pack a Symbol, a String in another encoding, a Hash subclass or Integer keys without a word, and they
    # would not come back as they went), so it is kept as cheap as Ruby allows (issue 34): recursive, bounded by the
    # nesting limit, one dispatch on the element's class (a class, not a kind: a subclass is not plain), no Array
    # allocated per element, and each Hash key object checked once per walk (the rows of a query result share
    # their key Strings). The iterative walk it replaced cost 7 ms of a 64 KiB query result's write, whose packing
    # takes 0.4 ms.
    def plain?(value)
      case KINDS[value.class]
      when :string then PLAIN_ENCODINGS.key?(value.encoding) && value.valid_encoding?
      when :scalar then true
      when :integer then INT_RANGE.cover?(value)
      when :hash then plain_hash?(value, 0, {}.compare_by_identity)
      when :array then plain_array?(value, 0, {}.compare_by_identity)
      else false
      end
    end

    # Whether every element of `array` (at `depth`) is plain; `keys`: the Hash keys found plain so far.
    def plain_array?(array, depth, keys)
      return false if depth >= Serializers::MAX_NESTING

      depth += 1
      array.each do |item|
        # plain_item?, inlined (a method call per element is a third of the walk)
        case KINDS[item.class]
        when :scalar then next
        when :string then next if PLAIN_ENCODINGS.key?(item.encoding) && item.valid_encoding?
        when :integer then next if INT_RANGE.cover?(item)
        when :hash then next if plain_hash?(item, depth, keys)
        when :array then next if plain_array?(item, depth, keys)
        end
        return false
      end
      true
    end

    def plain_hash?(hash, depth, keys)
      return false if depth >= Serializers::MAX_NESTING || hash.default || hash.default_proc

      depth += 1
      hash.each_pair do |key, item|
        unless keys[key]
          return false unless key.instance_of?(String) && PLAIN_ENCODINGS.key?(key.encoding) && key.valid_encoding?

          keys[key] = true
        end
        # plain_item?, inlined for the leaves (a method call per element is a third of the walk)
        case KINDS[item.class]
        when :scalar then next
        when :string then next if PLAIN_ENCODINGS.key?(item.encoding) && item.valid_encoding?
        when :integer then next if INT_RANGE.cover?(item)
        when :hash then next if plain_hash?(item, depth, keys)
        when :array then next if plain_array?(item, depth, keys)
        end
        return false
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
