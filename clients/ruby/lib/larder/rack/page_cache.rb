# frozen_string_literal: true

require "time"
require "securerandom"
require_relative "../../larder"
require_relative "cache_rules"
require_relative "page_site"

module Larder
  module Rack
    # The 003 page cache: a Rack middleware that, after the app renders a response a shared cache may keep, writes the
    # whole response (status, headers, body, and tags from `Surrogate-Key` / `Cache-Tag`) as a larder response entry
    # (spec/FORMAT.md §4) into the shared store, under exactly the key `larder serve` looks up for the request
    # (§5.3, with a `Vary` marker and variant key per §5.4). `larder serve --store <the same URL>` then answers the
    # page without reaching Ruby, until it expires or is purged (`Larder.purge(tag: …)`).
    #
    #   use Larder::Rack::PageCache, store: "memcached://cache1:11211", namespace: "www"
    #
    # A response is stored when its own headers allow it, by the rules the front applies (CacheRules: RFC 9111,
    # `CDN-Cache-Control`, `Surrogate-Control`): with `Cache-Control: public, max-age=60`, or
    # `CDN-Cache-Control: max-age=600` for larder alone. An action may also opt in explicitly, whatever its
    # Cache-Control says (browsers still get the app's own header), by setting `env["larder.page_cache"] =
    # { expires_in: seconds, stale: seconds, tags: [...] }` (Larder::PageCaching#larder_page_cache does). Even then,
    # only GET responses without `Set-Cookie` or `Vary: *` and with a storable status are written.
    #
    # `namespace`, `drop` and the rule options must be what the front runs with (`--namespace`,
    # `--drop-query-params`, `--stale-if-error`…): the key and the entry are then the ones the front would have
    # written. The key's scheme and site follow spec/HTTP.md §2 (PageSite): `site:` (e.g. "shop.example") when given,
    # and a request whose Host names another is not stored; else the request's Host, which must be a plain
    # `host[:port]`; `X-Forwarded-Host`, `X-Forwarded-Proto` and `Forwarded` count only from the peers in
    # `trusted_proxies:` (addresses or networks, as `larder serve --trusted-proxies`; none by default), so a request
    # that reaches the app without the front (a health check, an internal caller) cannot write a page for another
    # site. A request whose target is in absolute form is not stored (PageSite says how WEBrick differs). The
    # scheme is the `scheme:` option when given, else a trusted proxy's, else the connection's (`rack.url_scheme`:
    # http behind the front). What was not stored, and why, is counted in `not_stored` (reason `host` for the
    # site). Writing never fails the request: a store error is reported to `on_error` (default: a warning on
    # rack.errors) and the response goes out as rendered.
    class PageCache
      ENV_KEY = "larder.page_cache"
      # Response fields the front consumes (they address the cache) and never stores.
      CONSUMED = %w[surrogate-control surrogate-key cache-tag].freeze
      HOP_BY_HOP = %w[connection keep-alive proxy-connection proxy-authenticate proxy-authentication-info
                      proxy-authorization te trailer transfer-encoding upgrade].freeze

      attr_reader :store, :rules, :not_stored

      # `store`: a store URL or an open store. `max_body`: larger bodies are not stored (the front's --max-body).
      # `site`, `trusted_proxies`, `scheme` (http or https, which then keys every page): spec/HTTP.md §2 (above).
      def initialize(app, store:, namespace: "", drop: Keys::DEFAULT_DROP, max_body: 8 << 20, on_error: nil,
                     clock: -> { Larder.now_ms }, site: nil, trusted_proxies: [], scheme: nil, **rule_options)
        @app = app
        @site = PageSite.new(site: site, trusted_proxies: trusted_proxies, scheme: scheme)
        @not_stored = Hash.new(0)
        @store = store.is_a?(String) ? Stores.open(store) : store
        @namespace = namespace.to_s
        @drop = drop
        @max_body = max_body
        @on_error = on_error
        @clock = clock
        @rules = CacheRules.new(**rule_options)
      end

      def call(env)
        request_time = @clock.call
        status, headers, body = @app.call(env)
        return [status, headers, body] unless env["REQUEST_METHOD"] == "GET"

        written = store_response(env, status.to_i, headers, body, request_time)
        written ? [status, headers, written] : [status, headers, body]
      end

      # The key `larder serve` looks the request up under (before any Vary marker); nil when the request names no
      # site a page may be stored for (spec/HTTP.md §2).
      def base_key(env)
        scheme, authority = @site.resolve(env)
        return nil unless authority

        path = "#{env['SCRIPT_NAME']}#{env['PATH_INFO']}"
        query = env["QUERY_STRING"].to_s
        target = query.empty? ? path : "#{path}?#{query}"
        Keys.http_key("GET", scheme, authority, target, namespace: @namespace, drop: @drop)
      end

      # Writes a rendered response: the body array to send on (the original body was read and closed), or nil when
      # it is not stored (the original body is untouched).
      def store_response(env, status, headers, body, request_time)
        pairs = self.class.header_pairs(headers)
        plan = plan_for(env, status, pairs, request_time)
        return nil unless plan

        text = read_body(body)
        return [text] if text.bytesize > @max_body

        write(env, status, pairs, text, plan)
        [text]
      rescue StandardError => e
        report(env, e)
        text ? [text] : nil
      end

      # The request's header lines as the app was given them, [lowercase name, value] pairs (the server joined
      # repeated lines; selecting values read `a, b` as the lines `a` and `b` alike).
      def self.request_pairs(env)
        env.filter_map do |key, value|
          next unless value.is_a?(String)
          next [key.downcase.tr("_", "-"), value] if %w[CONTENT_TYPE CONTENT_LENGTH].include?(key)

          [key.delete_prefix("HTTP_").downcase.tr("_", "-"), value] if key.start_with?("HTTP_")
        end
      end

      # Rack headers as [lowercase name, value] pairs, one per line (Rack 2 joins repeated lines with "\n").
      def self.header_pairs(headers)
        headers.flat_map do |name, value|
          next [] if name.start_with?("rack.")

          value.to_s.split("\n").map { |line| [name.downcase, line] }
        end
      end

      private

      def plan_for(env, status, pairs, request_time)
        return refused("host") unless @site.resolve(env)

        now = @clock.call
        opt_in = env[ENV_KEY]
        if opt_in
          reason = @rules.refusal("GET", status, pairs)
          return refused(reason) if reason

          ttl = Integer(opt_in.fetch(:expires_in)) * 1000
          return nil unless ttl.positive?

          stale = Integer(opt_in.fetch(:stale, 0)) * 1000
          return CacheRules::Plan.new(fresh_ms: ttl, initial_age_ms: 0, keep_stale_ms: stale,
                                      vary: CacheRules.vary(pairs))
        end
        plan, reason = @rules.storage("GET", self.class.request_pairs(env), status, pairs, request_time, now)
        plan || refused(reason)
      end

      # Counts why a response was not stored; nil.
      def refused(reason)
        @not_stored[reason.to_s] += 1
        nil
      end

      def read_body(body)
        text = +"".b
        body.each { |chunk| text << chunk.b }
        text
      ensure
        body.close if body.respond_to?(:close)
      end

      def write(env, status, pairs, text, plan)
        now = @clock.call
        tags = tags_of(pairs, env[ENV_KEY])
        headers, coding = stored_headers(pairs, plan, now)
        response = HttpResponse.new(status, headers, text, coding)
        meta = { created_at: now, expires_at: [now + plan.fresh_ms, 1].max, stale_ms: plan.keep_stale_ms }
        entry = Larder.encode_response(response, compressor: "none", tags: tags, **meta)
        base = base_key(env) or raise ArgumentError, "the request names no site a page may be stored for"
        return @store.set(base, entry) if plan.vary.empty?

        write_variant(env, base, entry, plan.vary, meta)
      end

      # §5.4: the variant under its key, then the marker (keeping the generation of one that names the same headers).
      def write_variant(env, base, entry, vary, meta)
        marker, marker_meta = existing_marker(base, vary)
        marker ||= { "vary" => vary, "generation" => SecureRandom.hex(8) }
        marker_meta = later(marker_meta, meta)
        @store.set(Keys.variant_key(base, marker, self.class.request_pairs(env)), entry)
        @store.set(base, Larder.encode(marker, compressor: "none", **marker_meta))
      end

      def existing_marker(base, vary)
        found = @store.get(base)
        return nil unless found

        entry = Larder.decode(found)
        value = entry.value
        return nil unless entry.kind == "value" && value.is_a?(Hash) && value["vary"] == vary && value["generation"]

        [value, { created_at: entry.created_at, expires_at: entry.expires_at, stale_ms: entry.stale_ms }]
      rescue InvalidEntry
        nil
      end

      # The meta with the later hard expiry: a marker must outlive every variant it leads to.
      def later(marker_meta, meta)
        return meta unless marker_meta

        hard = ->(m) { m[:expires_at].zero? ? Float::INFINITY : m[:expires_at] + m[:stale_ms] }
        hard.call(meta) > hard.call(marker_meta) ? meta : marker_meta
      end

      # What the front stores: end-to-end fields without the consumed ones and Content-Length; a coding it can
      # transform moves into the entry; `Age` says the initial age; `Date` is added when missing.
      def stored_headers(pairs, plan, now)
        connection = pairs.select { |name, _| name == "connection" }
                          .flat_map { |_, value| value.split(",").map { |listed| listed.strip.downcase } }
        kept = pairs.reject do |name, _|
          HOP_BY_HOP.include?(name) || connection.include?(name) || CONSUMED.include?(name) ||
            %w[content-length age].include?(name)
        end
        coding = "identity"
        codings = kept.select { |name, _| name == "content-encoding" }
        if codings.size == 1 && HttpResponse::CONTENT_ENCODINGS.include?(codings.first[1].strip.downcase)
          coding = codings.first[1].strip.downcase # in any case, as the front reads it
          kept -= codings
        end
        kept << ["age", (plan.initial_age_ms / 1000).to_s]
        kept << ["date", Time.at(now / 1000).httpdate] unless kept.any? { |name, _| name == "date" }
        [kept, coding]
      end

      def tags_of(pairs, opt_in)
        tags = pairs.select { |name, _| name == "surrogate-key" }.flat_map { |_, v| v.split(/[ \t]+/) }
        tags += pairs.select { |name, _| name == "cache-tag" }.flat_map { |_, v| v.split(",").map(&:strip) }
        tags += Array(opt_in && opt_in[:tags]).map(&:to_s)
        tags.reject(&:empty?).uniq.sort
      end

      def report(env, error)
        return @on_error.call(error) if @on_error

        (env["rack.errors"] || $stderr).puts("larder page cache: not stored: #{error.class}: #{error.message}")
      end
    end
  end
end
