# frozen_string_literal: true

require "redis"
require_relative "remote"

module Larder
  module Stores
    # Redis, standalone (`redis://[user:pass@]host:6379/0`) or Cluster (`redis+cluster://h1:7000,h2:7001`), per
    # spec/STORES.md §5: SET with PXAT from the entry's expiry, tag sets kept as long as their longest-lived member,
    # SCAN purges on every master, counters and delete_if as the same Lua scripts the Rust store runs (each touches
    # one key, so they run on a Cluster too). Built on the redis gem (4.8 on Debian 12, whose Cluster client follows
    # MOVED/ASK redirections); a standalone server is ejected after `failures` failures and fails fast meanwhile.
    class Redis < Base
      BACKEND = "redis"

      DELETE_IF = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
      INCR = <<~LUA
        if redis.call('EXISTS', KEYS[1]) == 0 then
          if ARGV[2] == '0' then return false end
          redis.call('SET', KEYS[1], ARGV[1])
          if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
          return tonumber(ARGV[1])
        end
        return redis.call('INCRBY', KEYS[1], ARGV[1])
      LUA
      TAG = <<~LUA
        redis.call('SADD', KEYS[1], ARGV[1])
        local at = tonumber(ARGV[2])
        if at == 0 then redis.call('PERSIST', KEYS[1]) return 1 end
        local current = redis.call('PEXPIRETIME', KEYS[1])
        if current == -1 and redis.call('SCARD', KEYS[1]) > 1 then return 1 end
        if current == -1 or current < at then redis.call('PEXPIREAT', KEYS[1], at) end
        return 1
      LUA
      CONNECTION_ERRORS = [::Redis::BaseConnectionError, Errno::ECONNREFUSED, Errno::ECONNRESET, IOError].freeze

      def self.from_url(url)
        cluster = url.scheme == "redis+cluster"
        raise UrlError, "#{url.redacted}: #{url.scheme}:// needs a host" if url.hosts.empty?

        db = url.path.delete_prefix("/")
        raise UrlError, "#{url.redacted}: a Redis database is a number" unless db.empty? || db.match?(/\A\d+\z/)
        raise UrlError, "#{url.redacted}: a Redis Cluster has only database 0" if cluster && !db.empty? && db != "0"

        new(url.hosts, cluster: cluster, db: db.to_i, username: url.user, password: url.password,
                       prefix: url.take("prefix", ""), timeout: url.take_duration("timeout", 250),
                       connect_timeout: url.take_duration("connect_timeout", 500), pool: url.take_integer("pool", 4),
                       failures: url.take_integer("failures", 2), retry_after: url.take_duration("retry_after", 1000))
      end

      def initialize(hosts, cluster: false, db: 0, username: nil, password: nil, prefix: "", timeout: 250,
                     connect_timeout: 500, pool: 4, failures: 2, retry_after: 1000)
        super(prefix: prefix)
        @cluster = cluster
        @hosts = hosts
        @address = hosts.map(&:to_s).join(",")
        options = { timeout: timeout / 1000.0, connect_timeout: connect_timeout / 1000.0, reconnect_attempts: 0 }
        options[:username] = username if username
        options[:password] = password if password
        @options = options
        @pool = pool # the redis gem's client is thread-safe behind one connection; `pool` is accepted for the URL
        @redis = if cluster
                   ::Redis.new(cluster: hosts.map { |h| "redis://#{h}" }, **options)
                 else
                   ::Redis.new(host: hosts.first.host.delete_prefix("[").delete_suffix("]"), port: hosts.first.port,
                               db: db, **options)
                 end
        @health = Health.new(@address, failures: failures, retry_after_ms: retry_after)
      end

      def server_errors
        { @address => @health.errors }
      end

      def get(key)
        call { |redis| redis.get(@keys.stored(key))&.b }
      end

      def get_many(keys)
        return [] if keys.empty?

        stored = keys.map { |key| @keys.stored(key) }
        call do |redis|
          values = @cluster ? stored.map { |key| redis.get(key) } : redis.mget(*stored)
          values.map { |value| value&.b }
        end
      end

      def set(key, value, ttl: nil)
        check_key(key)
        write(@keys.stored(key), value, Base.expiry_ms(value, ttl), nx: false)
        nil
      end

      def add(key, value, ttl: nil)
        check_key(key)
        write(@keys.stored(key), value, Base.expiry_ms(value, ttl), nx: true)
      end

      def incr(key, delta, ttl: nil, create: true)
        ttl_ms = ttl ? (ttl * 1000).ceil : 0
        call { |redis| redis.eval(INCR, keys: [@keys.stored(key)], argv: [delta, create ? 1 : 0, ttl_ms]) }
      rescue ::Redis::CommandError => e
        raise NotACounter.new(BACKEND, "the value at #{key} is not a counter (#{e.message})", server: @address)
      end

      def delete_if(key, expected)
        call { |redis| redis.eval(DELETE_IF, keys: [@keys.stored(key)], argv: [expected.b]) == 1 }
      end

      def delete(key)
        call { |redis| redis.del(@keys.stored(key)) == 1 }
      end

      def clear
        return purge_prefix("").then { nil } unless @keys.prefix.empty?

        each_master(&:flushdb)
        nil
      end

      # Deletes the members of the tag's set, then the set (exact: once it returns, no reader sees them).
      def purge_tag(tag)
        set_key = @keys.internal("tag", tag)
        call do |redis|
          members = redis.sscan_each(set_key, count: 1000).to_a
          deleted = members.sum { |member| redis.del(member) }
          redis.del(set_key)
          deleted
        end
      end

      # SCAN MATCH <stored prefix>* on every master, deleting what it finds.
      def purge_prefix(prefix)
        pattern = "#{(@keys.prefix + prefix).gsub(/[*?\[\]\\]/) { |c| "\\#{c}" }}*"
        total = 0
        each_master do |redis|
          redis.scan_each(match: pattern, count: 1000).each_slice(100) do |batch|
            total += batch.sum { |member| redis.del(member) }
          end
        end
        total
      end

      def close
        @redis.close
        @masters&.each(&:close)
      end

      private

      def write(stored, value, expiry, nx:) # rubocop:disable Naming/MethodParameterName
        if expiry && expiry <= Larder.now_ms
          call { |redis| redis.del(stored) } unless nx
          return false
        end
        tags = Base.entry_tags(value)
        call do |redis|
          done = redis.set(stored, value.b, pxat: expiry, nx: nx || nil)
          next false if nx && !done

          tags.each { |tag| redis.eval(TAG, keys: [@keys.internal("tag", tag)], argv: [stored, expiry || 0]) }
          true
        end
      end

      # Standalone: this server. Cluster: a client per master, from CLUSTER NODES.
      def each_master(&)
        return call(&) unless @cluster

        call do |redis|
          @masters ||= redis.cluster("nodes").filter_map do |node|
            next unless node["flags"].include?("master")

            host, _, port = node["ip_port"].split("@").first.rpartition(":")
            ::Redis.new(host: host, port: port.to_i, **@options)
          end
          @masters.each(&)
        end
      end

      def call
        unless @cluster || @health.available?
          @health.refused
          raise StoreError.new(BACKEND, "server ejected after repeated failures", server: @address)
        end
        result = yield @redis
        @health.success
        result
      rescue *CONNECTION_ERRORS => e
        @health.failure unless @cluster
        raise StoreError.new(BACKEND, e.message, server: @address)
      end
    end
  end
end
