# frozen_string_literal: true

require "time"

module Larder
  module Rack
    # Whether a response may be kept by a shared cache, and for how long: the rules `larder serve` applies to what it
    # stores (crates/proxy/src/rfc9111: RFC 9111, RFC 9213 `CDN-Cache-Control`, `Surrogate-Control`, RFC 5861), so
    # that a page the app writes itself is stored exactly when, and for as long as, the front would have stored it.
    # Pure functions over header pairs; nothing here does I/O.
    class CacheRules
      # How a storable response is stored: milliseconds fresh (from now), its corrected initial age, how long past
      # freshness it is kept (stale windows, or revalidation with validators), and the request headers it varies on.
      Plan = Struct.new(:fresh_ms, :initial_age_ms, :stale_ms, :vary, keyword_init: true)

      # The directives larder acts on (nil = absent).
      Directives = Struct.new(:no_store, :no_cache, :private, :public, :must_revalidate, :proxy_revalidate,
                              :must_understand, :max_age, :s_maxage, :stale_while_revalidate, :stale_if_error)

      MAX_DELTA_SECONDS = 1 << 31
      FLAGS = %w[no-store no-cache private public must-revalidate proxy-revalidate must-understand].freeze
      UNDERSTOOD = [200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 451, 501].freeze
      CODINGS = %w[identity gzip br zstd].freeze

      attr_reader :targeted_fields

      # Options and defaults as `larder serve`'s: `targeted_fields` (--targeted-fields), `surrogate_control`,
      # `cache_set_cookie`, and, in seconds, `stale_while_revalidate`, `stale_if_error` (defaults for responses that
      # do not say) and `revalidation_window` (how long a stale response with validators is kept).
      def initialize(targeted_fields: ["cdn-cache-control"], surrogate_control: true, cache_set_cookie: false,
                     stale_while_revalidate: 0, stale_if_error: 300, revalidation_window: 3600)
        @targeted_fields = targeted_fields.map { |name| name.to_s.downcase }
        @surrogate_control = surrogate_control
        @cache_set_cookie = cache_set_cookie
        @default_swr_ms = stale_while_revalidate * 1000
        @default_sie_ms = stale_if_error * 1000
        @revalidation_window_ms = revalidation_window * 1000
      end

      # The plan for a response to a GET, or the reason it is not stored (a String, as the front's Cache-Status
      # detail says it). `response` is [name, value] pairs with lowercase names; times in ms.
      def storage(method, request_authorization, status, response, request_time_ms, response_time_ms)
        reason = refusal(method, status, response)
        return [nil, reason] if reason

        directives, use_expires = governing(response)
        reason = directive_refusal(directives, status, request_authorization)
        return [nil, reason] if reason

        vary = self.class.vary_names(response)
        return [nil, "vary-star"] if vary.nil?

        vary -= ["accept-encoding"] if self.class.decodable_coding?(response)
        plan = plan_for(status, response, directives, use_expires, request_time_ms, response_time_ms)
        plan ? [Plan.new(**plan, vary: vary), nil] : [nil, "no-explicit-freshness"]
      end

      # What the front checks for every stored response, whatever told the app to store it: GET, a status that can
      # be stored, no cookie for everyone, no `Vary: *`. nil when none applies.
      def refusal(method, status, response)
        return "method" unless method == "GET"
        return "status" if status < 200 || status == 206 || status == 304
        return "set-cookie" if !@cache_set_cookie && response.any? { |name, _| name == "set-cookie" }
        return "vary-star" if self.class.vary_names(response).nil?

        nil
      end

      # The directives that govern a shared cache: the first valid targeted field, else Surrogate-Control, else
      # Cache-Control (with Expires).
      def governing(response)
        @targeted_fields.each do |field|
          directives = self.class.parse_structured(values(response, field))
          return [directives, false] if directives
        end
        if @surrogate_control
          lines = values(response, "surrogate-control")
          return [self.class.parse(lines), false] unless lines.empty?
        end
        [self.class.parse(values(response, "cache-control")), true]
      end

      # Cache-Control syntax (every line): the first occurrence of a directive wins, commas in quotes do not split.
      def self.parse(lines)
        directives = Directives.new
        seen = []
        lines.each do |line|
          split_directives(line).each do |name, arg|
            next if seen.include?(name)

            seen << name
            apply(directives, name, arg)
          end
        end
        directives
      end

      # CDN-Cache-Control (RFC 9213): a Structured Fields dictionary; nil when absent or invalid (then ignored).
      def self.parse_structured(lines)
        return nil if lines.empty?

        dictionary = StructuredDictionary.parse(lines.join(", "))
        return nil unless dictionary

        directives = Directives.new
        dictionary.each do |key, item|
          return nil if item == :inner_list

          case key
          when "max-age", "s-maxage", "stale-while-revalidate", "stale-if-error"
            return nil unless item.is_a?(Integer) && item >= 0

            directives[key.tr("-", "_")] = [item, MAX_DELTA_SECONDS].min
          when "no-store", "no-cache", "private", "public", "must-revalidate", "proxy-revalidate", "immutable"
            return nil unless item == true

            directives[key.tr("-", "_")] = true unless key == "immutable"
          end
        end
        directives
      end

      # The names a response varies on, lowercase, sorted, without duplicates; nil for `Vary: *`.
      def self.vary_names(response)
        names = response.select { |name, _| name == "vary" }.flat_map do |_, line|
          line.split(",").map(&:strip).reject(&:empty?)
        end
        return nil if names.include?("*")

        names.map(&:downcase).uniq.sort
      end

      # No coding, or one a reader can decode for any client: then Accept-Encoding does not select a variant.
      def self.decodable_coding?(response)
        codings = response.select { |name, _| name == "content-encoding" }
        codings.empty? || (codings.size == 1 && CODINGS.include?(codings.first[1].strip))
      end

      # delta-seconds: digits, capped at 2^31; nil otherwise.
      def self.delta_seconds(arg)
        return nil unless arg&.match?(/\A[0-9]+\z/)

        [arg.to_i, MAX_DELTA_SECONDS].min
      end

      # An HTTP-date (IMF-fixdate, RFC 850 or asctime) in ms, or nil.
      def self.http_date_ms(text)
        (Time.httpdate(text.strip).to_r * 1000).to_i
      rescue ArgumentError
        nil
      end

      def self.split_directives(line)
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
        (parts << current).filter_map { |raw| directive(raw) }
      end

      def self.directive(raw)
        raw = raw.gsub(/\A[ \t]+|[ \t]+\z/, "")
        return nil if raw.empty?

        name, arg = raw.split("=", 2)
        return nil if name.empty? || name.match?(/[ \t]/)

        [name.downcase, arg && unquote(arg)]
      end

      def self.unquote(arg)
        return arg unless arg.length >= 2 && arg.start_with?('"') && arg.end_with?('"')

        arg[1..-2].gsub(/\\(.)/m, '\1')
      end

      def self.apply(directives, name, arg)
        if FLAGS.include?(name)
          directives[name.tr("-", "_")] = true
        elsif %w[max-age s-maxage].include?(name)
          directives[name.tr("-", "_")] = delta_seconds(arg) || 0 # invalid: never fresher than meant
        elsif %w[stale-while-revalidate stale-if-error].include?(name)
          directives[name.tr("-", "_")] = delta_seconds(arg)
        end
      end

      private

      def values(response, name)
        response.filter_map { |header, value| value if header == name }
      end

      def directive_refusal(directives, status, request_authorization)
        if directives.must_understand
          return "status" unless UNDERSTOOD.include?(status)
        elsif directives.no_store
          return "no-store"
        end
        return "private" if directives.private
        if request_authorization && !(directives.public || directives.must_revalidate || directives.s_maxage)
          return "authorization"
        end

        nil
      end

      def plan_for(status, response, directives, use_expires, request_time_ms, response_time_ms)
        validator = response.any? { |name, _| %w[etag last-modified].include?(name) }
        lifetime_ms, source = lifetime(response, directives, use_expires, response_time_ms)
        if lifetime_ms.nil?
          return nil unless validator && HEURISTIC.include?(status)

          lifetime_ms = 0
          source = :max_age
        end
        initial_age_ms = initial_age(response, request_time_ms, response_time_ms)
        fresh_ms = directives.no_cache ? 0 : [lifetime_ms - initial_age_ms, 0].max
        keep_ms = stale_allowance_ms(directives, source)
        keep_ms = [keep_ms, @revalidation_window_ms].max if validator
        return nil if fresh_ms.zero? && keep_ms.zero?

        { fresh_ms: fresh_ms, initial_age_ms: initial_age_ms, stale_ms: keep_ms }
      end

      HEURISTIC = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 451, 501].freeze

      def lifetime(response, directives, use_expires, response_time_ms)
        return [directives.s_maxage * 1000, :s_maxage] if directives.s_maxage
        return [directives.max_age * 1000, :max_age] if directives.max_age
        return nil unless use_expires

        expires = values(response, "expires")
        return nil if expires.empty?

        # Several Expires lines, or one that is not an HTTP-date, mean "already expired".
        at = expires.size == 1 ? self.class.http_date_ms(expires.first) : nil
        date = date_ms(response) || response_time_ms
        [at ? [at - date, 0].max.clamp(0, MAX_DELTA_SECONDS * 1000) : 0, :expires]
      end

      def stale_allowance_ms(directives, source)
        if directives.must_revalidate || directives.proxy_revalidate || directives.no_cache || source == :s_maxage
          return 0
        end

        swr = directives.stale_while_revalidate ? directives.stale_while_revalidate * 1000 : @default_swr_ms
        sie = directives.stale_if_error ? directives.stale_if_error * 1000 : @default_sie_ms
        [swr, sie].max
      end

      # RFC 9111 §4.2.3: the larger of the apparent age (from Date) and Age plus the time the app took.
      def initial_age(response, request_time_ms, response_time_ms)
        date = date_ms(response)
        apparent = date ? [response_time_ms - date, 0].max : 0
        age_line = values(response, "age").first
        age = self.class.delta_seconds(age_line&.split(",")&.first&.strip) || 0
        [apparent, (age * 1000) + [response_time_ms - request_time_ms, 0].max].max
      end

      def date_ms(response)
        line = values(response, "date").first
        line && self.class.http_date_ms(line)
      end
    end

    # RFC 8941 dictionaries, as much as CDN-Cache-Control needs: `{key => item}` where an item is an Integer, a
    # Float, a String, a Symbol (token), true/false, or :inner_list; parameters are checked and dropped. nil when the
    # text is not a valid dictionary.
    class StructuredDictionary
      KEY = /\A[a-z*][a-z0-9_\-.*]*/
      def self.parse(text)
        new(text).parse
      end

      def initialize(text)
        @text = text
        @pos = 0
      end

      def parse
        result = {}
        skip(/ */)
        until eof?
          key = scan(KEY) or return nil
          if scan(/=/)
            value = inner_list? ? :inner_list : bare_item
            return nil if value.nil?
          else
            value = true
          end
          parameters or return nil
          result[key] = value
          skip(/[ \t]*/)
          return result if eof?
          return nil unless scan(/,/)

          skip(/[ \t]*/)
          return nil if eof?
        end
        result
      end

      private

      def inner_list?
        return false unless scan(/\(/)

        loop do
          skip(/ */)
          return true if scan(/\)/)
          return nil if bare_item.nil? || !parameters
        end
      end

      def bare_item
        if (number = scan(/-?[0-9]{1,15}(\.[0-9]{1,3})?/))
          return nil if number.include?(".") ? number.split(".").first.delete("-").length > 12 : false

          number.include?(".") ? number.to_f : number.to_i
        elsif (string = scan(/"(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*"/))
          string[1..-2].gsub(/\\(.)/, '\1')
        elsif (token = scan(%r{[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*}))
          token.to_sym
        elsif (bytes = scan(%r{:[A-Za-z0-9+/=]*:}))
          bytes
        elsif (boolean = scan(/\?[01]/))
          boolean == "?1"
        end
      end

      def parameters
        while scan(/;/)
          skip(/ */)
          scan(KEY) or return false
          return false if scan(/=/) && bare_item.nil?
        end
        true
      end

      def scan(pattern)
        match = pattern.match(@text[@pos..])
        return nil unless match&.begin(0)&.zero?

        @pos += match[0].length
        match[0]
      end

      def skip(pattern)
        scan(Regexp.new("\\A#{pattern.source}"))
      end

      def eof?
        @pos >= @text.length
      end
    end
  end
end
