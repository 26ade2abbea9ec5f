# frozen_string_literal: true

require "uri"
require_relative "errors"

module Larder
  # One string names a store in every language (spec/STORES.md §1):
  # `scheme://[user[:password]@]host[:port][,host[:port]…][/path][?name=value&…]`.
  #
  # Options are taken one by one by the store that opens the URL (`take`, `take_duration`, `take_size`…); `finish!`
  # then refuses any option left over, naming it and listing the known ones, so a URL is never silently half-used.
  class StoreUrl
    Host = Struct.new(:host, :port) do
      def to_s
        "#{host}:#{port}"
      end
    end

    DEFAULT_PORTS = { "memcached" => 11_211, "redis" => 6379, "redis+cluster" => 6379, "postgres" => 5432 }.freeze
    SIZE_UNITS = { "" => 1, "K" => 1 << 10, "M" => 1 << 20, "G" => 1 << 30, "T" => 1 << 40 }.freeze
    DURATION_UNITS = { "ms" => 1, "s" => 1000, "m" => 60_000, "h" => 3_600_000 }.freeze

    attr_reader :scheme, :user, :password, :hosts, :path, :text

    def self.parse(text)
      new(text)
    end

    def initialize(text)
      @text = text
      match = %r{\A([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)([^?#]*)(?:\?([^#]*))?\z}.match(text)
      raise UrlError, "not a store URL (scheme://…): #{redacted}" unless match

      @scheme = match[1].downcase
      parse_authority(match[2])
      @path = decode(match[3])
      @options = {}
      @known = []
      parse_query(match[4].to_s)
    end

    # The URL with its password replaced by `***`, for messages and logs.
    def redacted
      @text.sub(%r{\A([^:]+://[^:@/]*:)[^@/]*@}, '\1***@')
    end

    # The value of option `name` (a String), or `default` when absent.
    def take(name, default = nil)
      @known << name
      @options.key?(name) ? @options.delete(name) : default
    end

    # A duration option, in ms: a bare number of milliseconds, or a number with exactly one of the units `ms`, `s`,
    # `m`, `h` (`250`, `250ms`, `2s`, `1m`, `1h`), and nothing else: no spaces, signs, fractions or compound units.
    # At most 12 digits, as the Rust parser allows, so one URL means the same in every language.
    def take_duration(name, default_ms)
      value = take(name)
      return default_ms if value.nil?

      self.class.parse_duration(value) or
        raise UrlError, "#{redacted}: option #{name}: #{value.inspect} is not a duration (a number with ms, s, m or h)"
    end

    # `value` as milliseconds, or nil when it is not a duration (see take_duration).
    def self.parse_duration(value)
      match = /\A([0-9]{1,12})(ms|s|m|h)?\z/.match(value)
      match && (match[1].to_i * DURATION_UNITS.fetch(match[2] || "ms"))
    end

    # A size option, in bytes: `512K`, `256M`, `10G` (`B`/`iB` and case do not matter).
    def take_size(name, default)
      value = take(name)
      return default if value.nil?

      self.class.parse_size(value) or
        raise UrlError, "#{redacted}: option #{name}: #{value.inspect} is not a size (512K, 256M, 10G)"
    end

    # `value` in bytes (`512K`, `256M`, `10G`; `B`/`iB` and case do not matter), or nil when it is not a size.
    def self.parse_size(value)
      match = /\A(\d+)\s*([KMGT]?)(?:I?B)?\z/i.match(value.strip)
      match && (match[1].to_i * SIZE_UNITS.fetch(match[2].upcase))
    end

    def take_integer(name, default)
      value = take(name)
      return default if value.nil?
      raise UrlError, "#{redacted}: option #{name}: #{value.inspect} is not a number" unless value.match?(/\A\d+\z/)

      value.to_i
    end

    def take_bool(name, default)
      value = take(name)
      return default if value.nil?
      return true if %w[true 1 yes on].include?(value.downcase)
      return false if %w[false 0 no off].include?(value.downcase)

      raise UrlError, "#{redacted}: option #{name}: #{value.inspect} is not true or false"
    end

    # Refuses options no store took.
    def finish!
      return if @options.empty?

      name = @options.keys.first
      raise UrlError, "#{redacted}: unknown option #{name.inspect} for #{scheme}:// (known: #{@known.uniq.join(', ')})"
    end

    private

    def parse_authority(authority)
      userinfo, _, hostlist = authority.rpartition("@")
      unless userinfo.empty?
        user, password = userinfo.split(":", 2)
        @user = decode(user)
        @password = password && decode(password)
      end
      @hosts = hostlist.split(",").reject(&:empty?).map { |part| parse_host(part) }
    end

    def parse_host(part)
      match = /\A(\[[^\]]+\]|[^:]+)(?::(\d*))?\z/.match(part)
      raise UrlError, "#{redacted}: bad host #{part.inspect}" unless match

      port = match[2].nil? || match[2].empty? ? DEFAULT_PORTS.fetch(@scheme, 0) : match[2].to_i
      raise UrlError, "#{redacted}: port #{port} is outside 1-65535" unless port.between?(1, 65_535)

      Host.new(match[1], port)
    end

    def parse_query(query)
      query.split("&").reject(&:empty?).each do |pair|
        name, value = pair.split("=", 2)
        name = decode(name)
        raise UrlError, "#{redacted}: option #{name.inspect} is given twice" if @options.key?(name)

        @options[name] = decode(value.to_s)
      end
    end

    def decode(text)
      URI.decode_www_form_component(text.gsub("+", "%2B"))
    rescue ArgumentError
      raise UrlError, "#{redacted}: bad percent-encoding in #{text.inspect}"
    end
  end
end
