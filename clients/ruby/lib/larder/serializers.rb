# frozen_string_literal: true

require "json"
require "msgpack"
require_relative "errors"
require_relative "msgpack_reader"
require_relative "claim_guard"

module Larder
  # The serializers of spec/FORMAT.md §2: MessagePack (the default), JSON, raw bytes and UTF-8 text.
  #
  # MessagePack is written in the canonical form every larder language produces for JSON-expressible values
  # (smallest integers, float64, str for text, bin for bytes, maps in their given order), which is what the msgpack
  # gem does with UTF-8 Strings as str and binary (ASCII-8BIT) Strings as bin; so an uncompressed entry is
  # byte-identical across languages.
  module Serializers
    # Arrays and maps may nest this deep in a value (spec/FORMAT.md §2): a container inside 100 others is too deep.
    MAX_NESTING = 100
    # Markers after which the msgpack gem allocates a claimed length up front (array32, map32): payloads holding
    # such a byte are fed to the gem by ClaimGuard, which checks every such claim before the gem reads it.
    ARRAY32 = "\xDD".b.freeze
    MAP32 = "\xDF".b.freeze
    # The str and bin markers with a length field: marker => [bytes of the length, its unpack format].
    SIZED_STRINGS = { 0xD9 => [1, "@1C"], 0xDA => [2, "@1n"], 0xDB => [4, "@1N"],
                      0xC4 => [1, "@1C"], 0xC5 => [2, "@1n"], 0xC6 => [4, "@1N"] }.freeze
    UNPACK_OPTIONS = { allow_unknown_ext: true }.freeze

    module_function

    # `value` serialized with the serializer called `name`. Raises TypeError or ArgumentError if it cannot be.
    def serialize(name, value)
      case name
      when "msgpack"
        check_nesting(value)
        begin
          MessagePack.pack(value)
        rescue RangeError => e
          raise ArgumentError, "integer outside the MessagePack range [-2^63, 2^64-1]: #{e.message}"
        end
      when "json"
        check_nesting(value)
        begin
          JSON.generate(value, allow_nan: false, max_nesting: false).b
        rescue JSON::GeneratorError => e
          raise ArgumentError, "json: #{e.message}"
        end
      when "text"
        raise TypeError, "the text serializer takes a String, not #{value.class}" unless value.is_a?(String)

        text = value.encode(Encoding::UTF_8)
        raise ArgumentError, "text is not valid UTF-8" unless text.valid_encoding?

        text.b
      when "raw"
        raise TypeError, "the raw serializer takes a String, not #{value.class}" unless value.is_a?(String)

        value.b
      else raise ArgumentError, "unknown serializer #{name.inspect}"
      end
    end

    # Raises ArgumentError if `value` holds arrays or hashes nested more than MAX_NESTING deep (a container used as a
    # hash key counts as nested in its hash). Iterative, and it stops at the limit.
    def check_nesting(value)
      return unless value.is_a?(Array) || value.is_a?(Hash)

      stack = [[value, 0]]
      until stack.empty?
        item, level = stack.pop
        raise ArgumentError, "value nested more than #{MAX_NESTING} levels deep" if level >= MAX_NESTING

        children = item.is_a?(Hash) ? item.keys + item.values : item
        children.each { |child| stack.push([child, level + 1]) if child.is_a?(Array) || child.is_a?(Hash) }
      end
    end

    # The MessagePack head of a String (str for UTF-8 and US-ASCII text, bin for binary), as the msgpack gem writes
    # it: the head followed by the String's bytes is `MessagePack.pack(text)`, without first copying the bytes into
    # a payload of their own.
    def string_head(text)
      append_string_head(text, String.new(capacity: 5, encoding: Encoding::BINARY))
    end

    # Appends `string_head(text)` to `out` (a binary String) and answers `out`.
    def append_string_head(text, out)
      size = text.bytesize
      if text.encoding == Encoding::BINARY
        return [0xC4, size].pack("CC", buffer: out) if size <= 0xFF
        return [0xC5, size].pack("Cn", buffer: out) if size <= 0xFFFF
        return [0xC6, size].pack("CN", buffer: out) if size <= 0xFFFF_FFFF
      else
        return [0xA0 | size].pack("C", buffer: out) if size <= 31
        return [0xD9, size].pack("CC", buffer: out) if size <= 0xFF
        return [0xDA, size].pack("Cn", buffer: out) if size <= 0xFFFF
        return [0xDB, size].pack("CN", buffer: out) if size <= 0xFFFF_FFFF
      end
      raise ArgumentError, "a #{size}-byte string is longer than MessagePack can hold"
    end

    # The value in a decompressed `payload`. Raises only InvalidEntry (kind bad_value).
    #
    # MessagePack maps become Hashes (the last of duplicate keys wins), str becomes a UTF-8 String and bin a binary
    # one, ext types come back as MessagePack::ExtensionValue; raw gives a binary String, text a UTF-8 String, JSON
    # the json library's types.
    def deserialize(name, payload)
      case name
      when "msgpack" then msgpack_value(payload)
      when "json" then load_json(payload)
      when "text" then decode_text(payload)
      when "raw" then payload.b
      else raise ArgumentError, "unknown serializer #{name.inspect}"
      end
    end

    # The one MessagePack object in `payload` (the msgpack gem's C unpacker, fed the payload by reference; its
    # full_unpack refuses trailing bytes). Raises only InvalidEntry (kind bad_value).
    #
    # A payload that is exactly one str or bin (a rendered fragment or page, the commonest value) is answered without
    # the unpacker, as it would answer: a new String of those bytes, UTF-8 for str and binary for bin; a suffix of
    # the payload, so Ruby shares the payload's buffer instead of copying it.
    def msgpack_value(payload, factory = nil)
      payload = payload.b unless payload.encoding == Encoding::BINARY
      head = single_string_head(payload)
      if head
        text = payload.byteslice(head, payload.bytesize - head)
        return payload.getbyte(0).between?(0xC4, 0xC6) ? text : text.force_encoding(Encoding::UTF_8)
      end
      unpacker = factory ? factory.unpacker(UNPACK_OPTIONS) : MessagePack::Unpacker.new(UNPACK_OPTIONS)
      return ClaimGuard.unpack(payload, unpacker) if large_claims?(payload)

      unpacker.feed_reference(payload)
      unpacker.full_unpack
    rescue InvalidEntry
      raise
    rescue EOFError
      raise InvalidEntry.new("bad_value", "msgpack: payload ends early")
    rescue StandardError => e
      raise InvalidEntry.new("bad_value", "msgpack: #{e.message}")
    end

    # Whether a (binary) payload that is not a single string may hold an array32 or map32 head: only one with a 0xDD
    # or 0xDF byte can (both looked for with memchr).
    def large_claims?(payload)
      payload.include?(ARRAY32) || payload.include?(MAP32)
    end

    # When `payload` is exactly one str or bin object (its head's length reaches the payload's end), the length of
    # that head; else nil.
    def single_string_head(payload)
      marker = payload.getbyte(0)
      return nil if marker.nil?
      return (payload.bytesize == 1 + (marker & 0x1F) ? 1 : nil) if marker.between?(0xA0, 0xBF)

      width, format = SIZED_STRINGS[marker]
      return nil if width.nil? || payload.bytesize <= width

      payload.bytesize == 1 + width + payload.unpack1(format) ? 1 + width : nil
    end

    # A text payload as a UTF-8 String; invalid UTF-8 is a bad_value error.
    def decode_text(payload)
      text = payload.dup.force_encoding(Encoding::UTF_8)
      raise InvalidEntry.new("bad_value", "text is not UTF-8") unless text.valid_encoding?

      text
    end

    # Parses one JSON text (RFC 8259, UTF-8). Raises only InvalidEntry (kind bad_value).
    def load_json(payload, object_class: nil)
      parse_json_text(decode_text(payload), object_class: object_class)
    rescue ArgumentError => e
      raise InvalidEntry.new("bad_value", "json: #{e.message}")
    end

    # JSON.parse, strictly: one JSON text, NaN and Infinity refused, any nesting (the caller checks depth).
    # Raises ArgumentError.
    def parse_json_text(text, object_class: nil)
      options = { max_nesting: false, allow_nan: false, create_additions: false }
      options[:object_class] = object_class if object_class
      JSON.parse(text, options)
    rescue JSON::ParserError, EncodingError => e
      raise ArgumentError, e.message.lines.first.to_s.strip
    end
  end
end
