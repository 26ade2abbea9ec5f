# frozen_string_literal: true

require_relative "structured_dictionary"

module Larder
  module Rack
    # The cache directives larder acts on (spec/HTTP.md §1.4), read from `Cache-Control` (and a request's),
    # `Surrogate-Control` (the same syntax, with three differences) or a targeted field such as `CDN-Cache-Control`
    # (an RFC 8941 dictionary). Flags are true or nil; the four numbers are whole seconds or nil when absent, an
    # invalid value counting as 0 (never fresher, nor staler, than the sender can be shown to allow).
    Directives = Struct.new(:no_store, :no_cache, :private, :public, :must_revalidate, :proxy_revalidate,
                            :must_understand, :max_age, :s_maxage, :stale_while_revalidate, :stale_if_error)

    # The three readers: Cache-Control syntax, Surrogate-Control, targeted fields.
    class Directives
      MAX_DELTA_SECONDS = 1 << 31
      FLAGS = %w[no-store no-cache private public must-revalidate proxy-revalidate must-understand].freeze
      NUMBERS = %w[max-age s-maxage stale-while-revalidate stale-if-error].freeze
      # A targeted field's flags that must be `true`, and those that may also be a String (a field-name list).
      STRUCTURED_FLAGS = %w[no-store public must-revalidate proxy-revalidate must-understand immutable].freeze
      STRUCTURED_FLAG_OR_LIST = %w[no-cache private].freeze

      class << self
        # Cache-Control syntax over every line: the first occurrence of a directive wins, even when its argument is
        # invalid (§1.4.1).
        def parse(lines)
          from_pairs(pairs(lines))
        end

        # Surrogate-Control (§1.4.3): `;name`-targeted elements skipped, `max-age=N+M` read as N; nil when what is left
        # holds no directive larder acts on (then the field does not govern).
        def parse_surrogate(lines)
          found = pairs(lines, surrogate: true)
          return nil unless found.keys.intersect?(FLAGS + NUMBERS)

          max_age = found["max-age"]
          found["max-age"] = max_age[/\A([0-9]+)\+[0-9]+\z/, 1] || max_age if max_age
          from_pairs(found)
        end

        # A targeted field (§1.4.2): nil when absent, empty, not a dictionary, or when a directive larder knows has
        # a value of the wrong type. Unknown members are ignored whatever their value.
        def parse_structured(lines)
          return nil if lines.empty?

          members = StructuredDictionary.parse(lines.join(", "))
          return nil if members.nil? || members.empty?

          directives = new
          members.each do |key, item|
            value = structured_value(key, item)
            return nil if value == :invalid

            directives[member(key)] = value unless value.nil? || key == "immutable"
          end
          directives
        end

        # The member of a directive name (`max-age` → :max_age).
        def member(name)
          name.tr("-", "_").to_sym
        end

        # delta-seconds (RFC 9111 §1.2.2): one or more digits, capped at 2^31; nil otherwise.
        def delta_seconds(arg)
          return nil unless arg&.match?(/\A[0-9]+\z/)

          [arg.to_i, MAX_DELTA_SECONDS].min
        end

        # The elements of one field line (RFC 9110 §5.6.1): commas inside quoted strings do not split (an
        # unterminated one runs to the end), spaces and tabs around elements and empty elements are dropped.
        def elements(line)
          parts = []
          current = +""
          quoted = escaped = false
          line.each_char do |char|
            if quoted
              current << char
              if escaped then escaped = false
              elsif char == "\\" then escaped = true
              elsif char == '"' then quoted = false
              end
            elsif char == ","
              parts << current
              current = +""
            else
              quoted = true if char == '"'
              current << char
            end
          end
          (parts << current).map { |part| part.gsub(/\A[ \t]+|[ \t]+\z/, "") }.reject(&:empty?)
        end

        private

        # {lowercase name => argument or nil}, the first occurrence of each name winning.
        def pairs(lines, surrogate: false)
          found = {}
          lines.each do |line|
            elements(line).each do |element|
              next if surrogate && unquoted_semicolon?(element)

              name, arg = directive(element)
              found[name] = arg if name && !found.key?(name)
            end
          end
          found
        end

        def from_pairs(found)
          directives = new
          FLAGS.each { |name| directives[member(name)] = true if found.key?(name) }
          NUMBERS.each { |name| directives[member(name)] = delta_seconds(found[name]) || 0 if found.key?(name) }
          directives
        end

        # [lowercase name, argument or nil], or nil when the name is not a token (`max-age =60`).
        def directive(element)
          name, arg = element.split("=", 2)
          return nil if name.empty? || name.match?(/[ \t]/)

          [name.downcase, arg && unquote(arg)]
        end

        # A quoted-string's content with quoted-pairs resolved; any other argument as written.
        def unquote(arg)
          return arg unless arg.length >= 2 && arg.start_with?('"') && arg.end_with?('"')

          out = +""
          chars = arg[1..-2].each_char
          loop do
            char = chars.next
            out << (char == "\\" ? next_or_empty(chars) : char)
          end
          out
        end

        def next_or_empty(chars)
          chars.next
        rescue StopIteration
          ""
        end

        def unquoted_semicolon?(element)
          quoted = escaped = false
          element.each_char do |char|
            if quoted
              if escaped then escaped = false
              elsif char == "\\" then escaped = true
              elsif char == '"' then quoted = false
              end
            elsif char == '"' then quoted = true
            elsif char == ";" then return true
            end
          end
          false
        end

        # A targeted member's value as a directive: seconds, true, nil (a member larder does not act on), or
        # :invalid (a directive larder knows with a value of the wrong type, which invalidates the field).
        def structured_value(key, item)
          if NUMBERS.include?(key)
            item.is_a?(Integer) && item >= 0 ? [item, MAX_DELTA_SECONDS].min : :invalid
          elsif STRUCTURED_FLAGS.include?(key)
            item == true ? true : :invalid
          elsif STRUCTURED_FLAG_OR_LIST.include?(key)
            item == true || item.is_a?(String) ? true : :invalid
          end
        end
      end
    end
  end
end
