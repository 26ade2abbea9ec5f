# frozen_string_literal: true

require_relative "directives"
require_relative "http_date"

module Larder
  module Rack
    # Whether larder, a shared cache, stores a response and for how long: spec/HTTP.md §1, the rules `larder serve`
    # applies (crates/proxy/src/rfc9111), checked by every case of spec/vectors/storage.json; so a page the app
    # writes itself is stored exactly when, and for as long as, the front would have stored it. Pure functions over
    # header lines ([name, value] pairs in message order, names in any case); nothing here does I/O.
    class CacheRules
      # How a storable response is stored (spec/HTTP.md §1.1): ms fresh from the response time, its corrected initial
      # age, how long past freshness it is kept, and the request headers it varies on.
      Plan = Struct.new(:fresh_ms, :initial_age_ms, :keep_stale_ms, :vary, keyword_init: true)

      # Statuses whose caching larder implements in full (for must-understand, §1.9).
      UNDERSTOOD = [200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 451, 501].freeze
      # Heuristically cacheable statuses (RFC 9110 §15.1).
      HEURISTIC = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 451, 501].freeze
      # Codings every larder reader decodes: with one of them Accept-Encoding does not select a variant.
      CODINGS = %w[identity gzip br zstd].freeze

      attr_reader :targeted_fields

      # The settings of spec/HTTP.md §1.8 with `larder serve`'s defaults, named as its flags: `targeted_fields`
      # (--targeted-fields), `surrogate_control`, `cache_set_cookie`, `honor_request_cache_control`, and in seconds
      # `heuristic_max` (--heuristic-max; 0 = no heuristic freshness), `stale_while_revalidate`, `stale_if_error`
      # (defaults for responses that do not say) and `revalidation_window` (how long a stale response with
      # validators is kept).
      def initialize(targeted_fields: ["CDN-Cache-Control"], surrogate_control: true, cache_set_cookie: false,
                     heuristic_max: 0, stale_while_revalidate: 0, stale_if_error: 300, revalidation_window: 3600,
                     honor_request_cache_control: false)
        @targeted_fields = targeted_fields.map { |name| name.to_s.downcase }
        @surrogate_control = surrogate_control
        @cache_set_cookie = cache_set_cookie
        @heuristic_max_ms = Integer(heuristic_max) * 1000
        @default_swr_ms = Integer(stale_while_revalidate) * 1000
        @default_sie_ms = Integer(stale_if_error) * 1000
        @revalidation_window_ms = Integer(revalidation_window) * 1000
        @honor_request_cache_control = honor_request_cache_control
      end

      # [Plan, nil] when the response is stored, else [nil, reason] (the `Cache-Status` detail: `method`, `status`,
      # `request-no-store`, `no-store`, `private`, `authorization`, `set-cookie`, `vary-star`,
      # `no-explicit-freshness`), checked in the order of spec/HTTP.md §1.2. Times in ms since the epoch.
      def storage(method, request_headers, status, response_headers, request_time_ms, response_time_ms)
        request = self.class.lowercase(request_headers)
        response = self.class.lowercase(response_headers)
        reason = early_refusal(method, status, request)
        return [nil, reason] if reason

        directives, use_expires = governing(response)
        reason = directive_refusal(directives, status, request) || late_refusal(response)
        return [nil, reason] if reason

        plan = plan_for(status, response, directives, use_expires, request_time_ms, response_time_ms)
        plan ? [plan, nil] : [nil, "no-explicit-freshness"]
      end

      # What applies to every stored response, whatever made the app store it (the page cache's opt-in): GET, a
      # storable status, no cookie for everyone, no `Vary: *`. The reason, or nil.
      def refusal(method, status, response_headers)
        response = self.class.lowercase(response_headers)
        early_refusal(method, status, []) || late_refusal(response)
      end

      # The directives that govern (§1.3) and whether `Expires` counts: the first valid, non-empty targeted field,
      # else Surrogate-Control when it holds a directive larder acts on, else Cache-Control with Expires.
      def governing(response)
        @targeted_fields.each do |field|
          directives = Directives.parse_structured(self.class.values(response, field))
          return [directives, false] if directives
        end
        if @surrogate_control
          directives = Directives.parse_surrogate(self.class.values(response, "surrogate-control"))
          return [directives, false] if directives
        end
        [Directives.parse(self.class.values(response, "cache-control")), true]
      end

      # The names a response varies on (§1.7), lowercase, sorted by byte value, without duplicates, and without
      # accept-encoding when the body's coding is one every reader decodes; nil for `Vary: *`.
      def self.vary(response_headers)
        response = lowercase(response_headers)
        names = values(response, "vary").flat_map { |line| line.split(",").map { |name| trim(name) } }
        return nil if names.include?("*")

        names = names.reject(&:empty?).map(&:downcase).uniq.sort
        decodable_coding?(response) ? names - ["accept-encoding"] : names
      end

      # No coding, or exactly one line naming one every reader decodes (in any case).
      def self.decodable_coding?(response)
        codings = values(response, "content-encoding")
        codings.empty? || (codings.size == 1 && CODINGS.include?(trim(codings.first).downcase))
      end

      # Header lines with lowercase names.
      def self.lowercase(headers)
        headers.map { |name, value| [name.to_s.downcase, value.to_s] }
      end

      # Every line of a field (lowercase name), in order.
      def self.values(headers, name)
        headers.filter_map { |header, value| value if header == name }
      end

      def self.trim(text)
        text.gsub(/\A[ \t]+|[ \t]+\z/, "")
      end

      private

      def early_refusal(method, status, request)
        return "method" unless method == "GET"
        return "status" if status < 200 || status > 599 || status == 206 || status == 304
        if @honor_request_cache_control && Directives.parse(self.class.values(request, "cache-control")).no_store
          return "request-no-store"
        end

        nil
      end

      def directive_refusal(directives, status, request)
        if directives.must_understand
          return "status" unless UNDERSTOOD.include?(status)
        elsif directives.no_store
          return "no-store"
        end
        return "private" if directives.private

        shared = directives.public || directives.must_revalidate || directives.s_maxage
        "authorization" if request.any? { |name, _| name == "authorization" } && !shared
      end

      def late_refusal(response)
        return "set-cookie" if !@cache_set_cookie && response.any? { |name, _| name == "set-cookie" }

        "vary-star" if self.class.vary(response).nil?
      end

      def plan_for(status, response, directives, use_expires, request_time_ms, response_time_ms)
        validator = response.any? { |name, _| %w[etag last-modified].include?(name) }
        lifetime_ms = lifetime(status, response, directives, use_expires, response_time_ms)
        if lifetime_ms.nil?
          return nil unless validator && (HEURISTIC.include?(status) || directives.public)

          lifetime_ms = 0
        end
        initial_age_ms = initial_age(response, request_time_ms, response_time_ms)
        fresh_ms = directives.no_cache ? 0 : [lifetime_ms - initial_age_ms, 0].max
        keep_ms = stale_window_ms(directives)
        keep_ms = [keep_ms, @revalidation_window_ms].max if validator
        return nil if fresh_ms.zero? && keep_ms.zero?

        Plan.new(fresh_ms: fresh_ms, initial_age_ms: initial_age_ms, keep_stale_ms: keep_ms,
                 vary: self.class.vary(response))
      end

      # §1.5: s-maxage, max-age, Expires (under Cache-Control), then the heuristic when it is on; nil for none.
      def lifetime(status, response, directives, use_expires, response_time_ms)
        return directives.s_maxage * 1000 if directives.s_maxage
        return directives.max_age * 1000 if directives.max_age

        expires = self.class.values(response, "expires")
        return expires_lifetime(response, expires, response_time_ms) if use_expires && !expires.empty?
        return nil unless @heuristic_max_ms.positive? && (HEURISTIC.include?(status) || directives.public)

        last_modified = first_date(response, "last-modified", response_time_ms)
        return nil unless last_modified

        base = first_date(response, "date", response_time_ms) || response_time_ms
        [[base - last_modified, 0].max / 10, @heuristic_max_ms].min
      end

      # Several lines, or one that is not an HTTP-date, mean "already expired" (RFC 9111 §5.3).
      def expires_lifetime(response, expires, response_time_ms)
        at = expires.size == 1 ? HttpDate.parse_ms(expires.first, now_ms: response_time_ms) : nil
        return 0 unless at

        base = first_date(response, "date", response_time_ms) || response_time_ms
        (at - base).clamp(0, Directives::MAX_DELTA_SECONDS * 1000)
      end

      # §1.7: nothing when stale use is forbidden; else the larger stale directive, each from the response when it
      # says (an invalid value being 0) and from the settings when it does not.
      def stale_window_ms(directives)
        if directives.must_revalidate || directives.proxy_revalidate || directives.no_cache || directives.s_maxage
          return 0
        end

        swr = directives.stale_while_revalidate ? directives.stale_while_revalidate * 1000 : @default_swr_ms
        sie = directives.stale_if_error ? directives.stale_if_error * 1000 : @default_sie_ms
        [swr, sie].max
      end

      # §1.6, RFC 9111 §4.2.3: the larger of the apparent age (from Date) and Age plus the response delay.
      def initial_age(response, request_time_ms, response_time_ms)
        date = first_date(response, "date", response_time_ms)
        apparent = date ? [response_time_ms - date, 0].max : 0
        age_line = self.class.values(response, "age").first
        age = age_line ? Directives.delta_seconds(self.class.trim(age_line.split(",", 2).first.to_s)) || 0 : 0
        [apparent, (age * 1000) + [response_time_ms - request_time_ms, 0].max].max
      end

      def first_date(response, name, now_ms)
        line = self.class.values(response, name).first
        line && HttpDate.parse_ms(line, now_ms: now_ms)
      end
    end
  end
end
