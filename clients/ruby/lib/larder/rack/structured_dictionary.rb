# frozen_string_literal: true

require "base64"

module Larder
  module Rack
    # RFC 8941 Dictionaries (§4.2.2), the version RFC 9213 targeted fields are defined on: no Date (`@…`) or Display
    # String (`%"…"`) items. `parse` gives `{key => item}` (a repeated key keeps its last value, parameters are
    # checked and dropped), or nil when the text is not a valid dictionary. Items: Integer, Decimal, String, Token,
    # Bytes, true/false, or InnerList, so a caller can tell every type apart.
    class StructuredDictionary
      Token = Struct.new(:name)
      Bytes = Struct.new(:base64)
      Decimal = Struct.new(:text)
      InnerList = Struct.new(:items)

      # Raised inside the parser at the first syntax error.
      class Invalid < StandardError; end

      LCALPHA = ("a".."z").to_a.join
      DIGIT = "0123456789"
      ALPHA = LCALPHA + LCALPHA.upcase
      TCHAR = "!\#$%&'*+-.^_`|~#{DIGIT}#{ALPHA}".freeze
      KEY_FIRST = "#{LCALPHA}*".freeze
      KEY_CHARS = "#{LCALPHA}#{DIGIT}_-.*".freeze
      BASE64 = "#{ALPHA}#{DIGIT}+/=".freeze

      def self.parse(text)
        return nil unless text.b.match?(/\A[\x20-\x7E\t]*\z/n)

        new(text).dictionary
      rescue Invalid
        nil
      end

      def initialize(text)
        @text = text
        @pos = 0
      end

      def dictionary
        skip(" ")
        members = {}
        until eof?
          key = self.key
          if peek == "="
            @pos += 1
            value = item_or_inner_list
          else
            value = true
            parameters
          end
          members.delete(key) # RFC 8941 §4.2.2: a repeated key keeps its last value
          members[key] = value
          skip(" \t")
          break if eof?
          raise Invalid, "expected a comma" unless take == ","

          skip(" \t")
          raise Invalid, "trailing comma" if eof?
        end
        members
      end

      private

      def item_or_inner_list
        return bare_item.tap { parameters } unless peek == "("

        @pos += 1
        items = []
        loop do
          skip(" ")
          if peek == ")"
            @pos += 1
            parameters
            return InnerList.new(items)
          end
          items << bare_item
          parameters
          raise Invalid, "bad inner list" unless [" ", ")"].include?(peek)
        end
      end

      def parameters
        while peek == ";"
          @pos += 1
          skip(" ")
          key
          next unless peek == "="

          @pos += 1
          bare_item
        end
      end

      def key
        raise Invalid, "bad key" unless in?(peek, KEY_FIRST)

        start = @pos
        @pos += 1 while in?(peek, KEY_CHARS)
        @text[start...@pos]
      end

      def bare_item
        char = peek
        if char == "-" || in?(char, DIGIT) then number
        elsif char == '"' then string
        elsif in?(char, "#{ALPHA}*") then token
        elsif char == ":" then byte_sequence
        elsif char == "?" then boolean
        else
          raise Invalid, "unknown item type" # RFC 8941 has no Date (@) or Display String (%)
        end
      end

      def number
        negative = peek == "-"
        @pos += 1 if negative
        raise Invalid, "bad number" unless in?(peek, DIGIT)

        digits = +""
        decimal = false
        while (char = peek)
          if in?(char, DIGIT)
            digits << char
          elsif !decimal && char == "."
            raise Invalid, "decimal too long" if digits.length > 12

            digits << char
            decimal = true
          else
            break
          end
          @pos += 1
          raise Invalid, "number too long" if digits.length > (decimal ? 16 : 15)
        end
        return negative ? -digits.to_i : digits.to_i unless decimal
        raise Invalid, "bad decimal" if digits.end_with?(".") || digits.split(".").last.length > 3

        Decimal.new(negative ? "-#{digits}" : digits)
      end

      def string
        @pos += 1
        out = +""
        until eof?
          case (char = take)
          when "\\"
            raise Invalid, "bad escape" unless ['"', "\\"].include?(peek)

            out << take
          when '"' then return out
          when "\t" then raise Invalid, "bad string character"
          else out << char
          end
        end
        raise Invalid, "unterminated string"
      end

      def token
        start = @pos
        @pos += 1
        @pos += 1 while in?(peek, "#{TCHAR}:/")
        Token.new(@text[start...@pos])
      end

      def byte_sequence
        @pos += 1
        start = @pos
        @pos += 1 while in?(peek, BASE64)
        raise Invalid, "unterminated byte sequence" unless take == ":"

        content = @text[start...(@pos - 1)]
        begin
          Base64.strict_decode64(content + ("=" * (-content.length % 4)))
        rescue ArgumentError
          raise Invalid, "bad base64"
        end
        Bytes.new(content)
      end

      def boolean
        @pos += 1
        char = take
        raise Invalid, "bad boolean" unless %w[0 1].include?(char)

        char == "1"
      end

      def in?(char, set)
        !char.nil? && set.include?(char)
      end

      def peek
        @text[@pos]
      end

      def take
        char = peek
        @pos += 1
        char
      end

      def skip(chars)
        @pos += 1 while in?(peek, chars)
      end

      def eof?
        @pos >= @text.length
      end
    end
  end
end
