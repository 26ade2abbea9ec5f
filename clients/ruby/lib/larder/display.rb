# frozen_string_literal: true

require "base64"
require_relative "msgpack_reader"

module Larder
  # Display JSON (spec/CLI.md): how a decoded value is written, the same in every language, so outputs compare.
  #
  # Compact JSON, non-ASCII written as itself; floats as Python's `repr` (`1.0`, `1e+16`, `NaN`, `Infinity`); byte
  # strings as JSON strings when they are UTF-8, else `{"$base64":"…"}`; MessagePack ext as
  # `{"$ext":t,"$base64":"…"}`; maps keep their order and duplicate keys, and a key that is not a string is written
  # as the display JSON of the key, as a string. `inspect` bounds the depth (100, spec/FORMAT.md §2) and the length
  # of what it writes.
  module Display
    # The value holds arrays or maps nested deeper than the display allows.
    class TooDeep < StandardError; end

    # The display would be longer than it was allowed.
    class TooLarge < StandardError; end

    # On a terminal, `inspect` shows at most this many characters of a line's text unless --full.
    CUT_AT = 200
    ESCAPES = { '"' => '\\"', "\\" => "\\\\", "\b" => "\\b", "\f" => "\\f", "\n" => "\\n", "\r" => "\\r",
                "\t" => "\\t" }.freeze
    # A display may hold at most this many UTF-8 bytes per character of its limit while it is being written.
    BYTES_PER_CHAR = 4

    module_function

    # The display JSON of a decoded value: nil, true/false, Integer, Float, String (binary Strings shown as text when
    # UTF-8), MsgpackReader::Ext, MessagePack::ExtensionValue, Array, Hash, MsgpackReader::MapPairs.
    # Raises TooDeep at a container inside `max_depth` others, TooLarge past `limit` characters.
    def display_json(value, limit: nil, max_depth: nil)
      writer = Writer.new(limit && (BYTES_PER_CHAR * limit), max_depth)
      out = String.new(encoding: Encoding::UTF_8)
      writer.write(value, 0, out)
      raise TooLarge, "the display would exceed #{limit} characters" if limit && out.length > limit

      out
    end

    # Writes values into a String, checking depth and size as it goes.
    class Writer
      def initialize(byte_limit, max_depth)
        @byte_limit = byte_limit
        @max_depth = max_depth
      end

      def write(value, depth, out)
        case value
        when MsgpackReader::MapPairs, Hash then write_map(value, depth, out)
        when Array then write_array(value, depth, out)
        else
          out << Display.scalar_json(value)
          check(out)
        end
      end

      private

      def enter(depth)
        return unless @max_depth && depth >= @max_depth

        raise TooDeep,
              "the value holds arrays or maps nested more than #{@max_depth} deep"
      end

      def write_array(items, depth, out)
        enter(depth)
        out << "["
        items.each_with_index do |item, index|
          out << "," if index.positive?
          write(item, depth + 1, out)
        end
        out << "]"
      end

      def write_map(pairs, depth, out)
        enter(depth)
        out << "{"
        pairs.each_with_index do |(key, item), index|
          out << "," if index.positive?
          out << key_json(key, depth) << ":"
          write(item, depth + 1, out)
        end
        out << "}"
        check(out)
      end

      def key_json(key, depth)
        text = Display.utf8(key) if key.is_a?(String)
        return Display.quote(text) if text

        inner = String.new(encoding: Encoding::UTF_8)
        write(key, depth + 1, inner)
        quoted = Display.quote(inner)
        check(quoted)
        quoted
      end

      def check(out)
        raise TooLarge, "the display would be too long" if @byte_limit && out.bytesize > @byte_limit
      end
    end

    # The display JSON of a value that is not an array or a map.
    def scalar_json(value)
      case value
      when nil then "null"
      when true then "true"
      when false then "false"
      when Integer then value.to_s
      when Float then float_text(value)
      when String then bytes_json(value)
      when MsgpackReader::Ext, MessagePack::ExtensionValue
        data = value.is_a?(MsgpackReader::Ext) ? value.data : value.payload
        code = value.is_a?(MsgpackReader::Ext) ? value.code : value.type
        "{\"$ext\":#{code},\"$base64\":\"#{Base64.strict_encode64(data)}\"}"
      when Symbol then quote(value.to_s)
      else raise TypeError, "cannot display a #{value.class}"
      end
    end

    # The shortest text that reads back as the same float64, as Python's `repr` writes it: positional from 1e-4 to
    # below 1e16, otherwise scientific with a sign and at least two exponent digits.
    def float_text(value)
      return "NaN" if value.nan?
      return value.positive? ? "Infinity" : "-Infinity" if value.infinite?

      sign = value.negative? || (value.zero? && (1.0 / value).negative?) ? "-" : ""
      digits, exponent = shortest_digits(value.abs)
      return "#{sign}0.0" if digits.empty?

      "#{sign}#{python_repr(digits, exponent)}"
    end

    # The shortest round-trip decimal digits of a positive float (no leading or trailing zeros), and the decimal
    # exponent of the first digit (value = d.ddd × 10^exponent); from Ruby's own shortest representation.
    def shortest_digits(value)
      mantissa, exp = value.to_s.split("e")
      whole, fraction = mantissa.split(".")
      all = whole + fraction.to_s
      leading = all[/\A0*/].length
      [all[leading..].sub(/0+\z/, ""), whole.length - 1 - leading + exp.to_i]
    end

    def python_repr(digits, exponent)
      if exponent >= -4 && exponent < 16
        if exponent.negative?
          "0.#{'0' * (-exponent - 1)}#{digits}"
        else
          whole = digits[0, exponent + 1].ljust(exponent + 1, "0")
          fraction = digits[(exponent + 1)..].to_s
          "#{whole}.#{fraction.empty? ? '0' : fraction}"
        end
      else
        mantissa = digits.length > 1 ? "#{digits[0]}.#{digits[1..]}" : digits
        format("%<m>se%<s>s%<e>02d", m: mantissa, s: exponent.negative? ? "-" : "+", e: exponent.abs)
      end
    end

    # `text` as a JSON string: `"` and `\` escaped, short forms for \b \f \n \r \t, other controls \u00xx.
    def quote(text)
      escaped = text.gsub(/["\\\x00-\x1f]/) { |c| ESCAPES[c] || format("\\u%04x", c.ord) }
      "\"#{escaped}\""
    end

    # A byte string's display JSON: a JSON string when it is UTF-8, else `{"$base64":"…"}`.
    def bytes_json(data)
      text = utf8(data)
      text ? quote(text) : "{\"$base64\":\"#{Base64.strict_encode64(data.b)}\"}"
    end

    # A byte string as shown in a human-form line: its text, unquoted, when UTF-8, else `{"$base64":"…"}`.
    def bytes_text(data)
      utf8(data) || "{\"$base64\":\"#{Base64.strict_encode64(data.b)}\"}"
    end

    # `data` as a UTF-8 String, or nil when its bytes are not UTF-8.
    def utf8(data)
      text = data.dup.force_encoding(Encoding::UTF_8)
      text.valid_encoding? ? text : nil
    end

    # `text` cut to its first `limit` characters followed by `… (N more characters)`.
    def cut_text(text, limit)
      more = text.length - limit
      return text if more <= 0

      "#{text[0, limit]}… (#{more} more #{more == 1 ? 'character' : 'characters'})"
    end

    # Whether `value` holds an array or map inside `max_depth` others (map keys count as inside their map).
    def nests_deeper?(value, max_depth)
      stack = [[value, 0]]
      until stack.empty?
        node, level = stack.pop
        children = case node
                   when MsgpackReader::MapPairs then node.flatten(1)
                   when Hash then node.to_a.flatten(1)
                   when Array then node
                   else next
                   end
        return true if level >= max_depth

        children.each { |child| stack.push([child, level + 1]) if child.is_a?(Array) || child.is_a?(Hash) }
      end
      false
    end
  end
end
