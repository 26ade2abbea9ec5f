# frozen_string_literal: true

require "json"
require "msgpack"
require_relative "errors"
require_relative "msgpack_reader"

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
    # such a byte are walked by MsgpackReader before the gem sees them.
    LARGE_CLAIMS = /[\xDD\xDF]/n

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

    def msgpack_value(payload, factory = nil)
      MsgpackReader.check_whole(payload) if payload.match?(LARGE_CLAIMS)
      unpacker = (factory || MessagePack::DefaultFactory).unpacker(allow_unknown_ext: true)
      unpacker.feed(payload)
      value = unpacker.read
      raise InvalidEntry.new("bad_value", "msgpack: bytes after the value") unless unpacker.buffer.empty?

      value
    rescue InvalidEntry
      raise
    rescue EOFError
      raise InvalidEntry.new("bad_value", "msgpack: payload ends early")
    rescue StandardError => e
      raise InvalidEntry.new("bad_value", "msgpack: #{e.message}")
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
