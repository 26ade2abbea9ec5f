# frozen_string_literal: true

require "ipaddr"

module Larder
  module Rack
    # Which site a page written by the app is for (spec/HTTP.md §2), so that a request that reaches the app directly
    # (a health check, an internal caller, a second load balancer: not through larder's front) cannot write a page
    # the front then serves to every visitor of another site. The authority is the configured `site`, else the
    # request's Host; a Host (or forwarded host) that is not a plain `host[:port]` stores nothing.
    # `X-Forwarded-Host`, `X-Forwarded-Proto` and `Forwarded` count only when the peer (REMOTE_ADDR) is in
    # `trusted_proxies`, as `larder serve --trusted-proxies`; Rack's `Request#host` and `#scheme` believe them from
    # anyone, so they are not used. A request whose target is in absolute form (`GET http://a.example/x`: REQUEST_URI
    # as Puma, Unicorn and Passenger give it) is not stored, whatever its Host says (§2 step 2). WEBrick rebuilds
    # REQUEST_URI as an absolute URL from the Host for every request, so there an absolute target cannot be told
    # from an origin-form one; it is stored only when its authority is the Host's (keyed on that Host: no other
    # site). The scheme is the `scheme` option when given, else a trusted proxy's, else the connection's.
    # `resolve` gives [scheme, authority], or nil: not stored, reason `host`.
    class PageSite
      NAME = /\A[A-Za-z0-9._~-]+\z/
      V6 = /\A\[[0-9A-Fa-f:.]+\]\z/
      PORT = /\A[0-9]{1,5}\z/
      DEFAULT_PORT = { "http" => "80", "https" => "443" }.freeze

      # Whether `text` is `host[:port]` as larder's front accepts a Host: a DNS-style name, an IPv4 address or a
      # bracketed IPv6 literal, then optionally `:` and 1 to 5 digits up to 65535.
      def self.plain_authority?(text)
        return false unless text.is_a?(String) && text.ascii_only?

        parts = split_port(text)
        return false unless parts

        host, port = parts
        return false unless host.match?(text.start_with?("[") ? V6 : NAME)

        port.nil? || (port.match?(PORT) && port.to_i <= 65_535)
      end

      # [host, port or nil] of an authority, or nil when a bracketed literal does not close or is followed by
      # anything but a port.
      def self.split_port(text)
        if text.start_with?("[")
          close = text.index("]") or return nil
          rest = text[(close + 1)..]
          return [text[0..close], nil] if rest.empty?

          rest.start_with?(":") ? [text[0..close], rest[1..]] : nil
        elsif text.include?(":")
          at = text.rindex(":")
          [text[0...at], text[(at + 1)..]]
        else
          [text, nil]
        end
      end

      # spec/FORMAT.md §5.3 step 3 for a plain authority: ASCII lowercase, the scheme's default port removed.
      def self.normalise(authority, scheme)
        lowered = authority.downcase
        default = DEFAULT_PORT[scheme]
        default && lowered.end_with?(":#{default}") ? lowered[0...-(default.size + 1)] : lowered
      end

      # The authority of an absolute-form request target (`http://a.example/x` → `a.example`), else nil.
      def self.target_authority(target)
        return nil if target.nil? || target.start_with?("/") || !target.include?("://")

        target.split("://", 2).last[%r{\A[^/?#]*}]
      end

      attr_reader :site, :scheme

      def initialize(site: nil, trusted_proxies: [], scheme: nil)
        if site && !self.class.plain_authority?(site)
          raise ArgumentError, "site must be a plain host[:port] such as shop.example or shop.example:8443, " \
                               "not #{site.inspect}"
        end
        unless scheme.nil? || %w[http https].include?(scheme.to_s)
          raise ArgumentError, "scheme is http or https, not #{scheme.inspect}"
        end
        if trusted_proxies.is_a?(String)
          raise ArgumentError, "trusted_proxies is a list of addresses or networks, not a string"
        end

        @site = site
        @scheme = scheme&.to_s
        @trusted = trusted_proxies.map do |entry|
          IPAddr.new(entry.to_s.strip)
        rescue IPAddr::Error
          raise ArgumentError, "#{entry.inspect} is not an IP address or a network such as 10.0.0.0/8"
        end
      end

      # [scheme, normalised authority] to key the request of `env` on, or nil when no page may be stored for it.
      def resolve(env)
        host = env["HTTP_HOST"]
        authority = host
        proto = nil
        if trusted?(env["REMOTE_ADDR"])
          claims = claims(env) or return nil
          proto, claimed_host = claims
          authority = claimed_host if claimed_host
        end
        return nil unless authority && !authority.empty? && self.class.plain_authority?(authority)

        connection = env["rack.url_scheme"].to_s.downcase
        scheme = @scheme || proto || (%w[http https].include?(connection) ? connection : "http")
        return nil unless origin_form?(env, host, scheme)

        key_authority = self.class.normalise(authority, scheme)
        return nil if @site && key_authority != self.class.normalise(@site, scheme)

        [scheme, key_authority]
      end

      private

      def trusted?(peer)
        return false if @trusted.empty? || peer.nil? || peer.empty?

        address = IPAddr.new(peer.delete("[]"))
        address = address.native if address.ipv6? && address.ipv4_mapped?
        @trusted.any? { |network| network.family == address.family && network.include?(address) }
      rescue IPAddr::Error
        false
      end

      # Whether the request's target is in origin form (`/p?q`): an absolute-form target is never stored. Under
      # WEBrick, whose REQUEST_URI is always absolute (rebuilt from the Host), one whose authority is the Host's.
      def origin_form?(env, host, scheme)
        target = self.class.target_authority(env["REQUEST_URI"])
        return true if target.nil?
        return false unless env["SERVER_SOFTWARE"].to_s.start_with?("WEBrick")
        return false unless host && self.class.plain_authority?(host) && self.class.plain_authority?(target)

        self.class.normalise(target, scheme) == self.class.normalise(host, scheme)
      end

      # [proto, host] a trusted proxy claims, read as the front reads them; nil when `Forwarded` and `X-Forwarded-*`
      # disagree, or the protocol is neither http nor https.
      def claims(env)
        claimed = { "proto" => first(env["HTTP_X_FORWARDED_PROTO"]), "host" => first(env["HTTP_X_FORWARDED_HOST"]) }
        env["HTTP_FORWARDED"].to_s.split(",", 2).first.to_s.split(";").each do |pair|
          name, value = pair.split("=", 2)
          name = name.to_s.strip.downcase
          next unless value && claimed.key?(name)

          value = value.strip.delete_prefix('"').delete_suffix('"')
          return nil if claimed[name] && claimed[name].casecmp(value) != 0

          claimed[name] = value
        end
        proto = claimed["proto"]&.downcase
        return nil if proto && !%w[http https].include?(proto)

        [proto, claimed["host"]]
      end

      def first(value)
        element = value.to_s.split(",", 2).first.to_s.strip
        element.empty? ? nil : element
      end
    end
  end
end
