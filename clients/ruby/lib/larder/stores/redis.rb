# frozen_string_literal: true

require_relative "redis_nodes"
require_relative "redis_scripts"

module Larder
  module Stores
    # Redis, standalone (`redis://[user:pass@]host:6379/0`) or Cluster (`redis+cluster://h1:7000,h2:7001`), per
    # spec/STORES.md §5: SET with PXAT from the entry's expiry, tag sets kept as long as their longest-lived member,
    # SCAN purges on every master, counters, tags and delete_if as the Lua scripts of spec/redis/ (RedisScripts: the
    # files' bytes, by EVALSHA, falling back to EVAL when the server does not have them yet; each touches one key, so
    # they run on a Cluster too). Over larder's own RESP client (redis_nodes.rb says why not the redis
    # gem), which bounds every reply: `timeout` is the total deadline of an operation, values are at most
    # `max_value` (default 64M), replies nest at most 8 deep and hold, as a whole, no more elements and bytes than
    # the command can produce (a script's one integer or status; GET one value; MGET of n keys n values; a SCAN page
    # COUNT + 1,024 names): refused at the first line or bulk announced past that, before it is read; a bad
    # reply is a failure of its server. A standalone server is ejected after `failures` failures and fails fast
    # meanwhile; Cluster nodes are not ejected (the cluster fails over on its own), each request bounded by `timeout`.
    class Redis < Base
      BACKEND = "redis"

      SCAN_COUNT = 1000
      # What a SCAN or SSCAN page may hold beyond its COUNT: Redis returns a small set whole, and a bucket's chain
      # (spec/STORES.md §2, "Whole reply").
      SCAN_SLACK = 1024
      # The longest name a SCAN or SSCAN page may hold: larder's own keys are at most 250 bytes (a foreign key of
      # the prefix longer than this fails the purge, with the store's error), so a page of huge strings is refused
      # at its first one, not read to max_value.
      SCAN_NAME_MAX = 64 << 10
      DELETE_BATCH = 500
      BULK_OR_NIL = [String, NilClass].freeze
      VALUE = ->(reply) { reply.nil? || reply.is_a?(String) }
      INTEGER = [Integer].freeze
      INTEGER_OR_NIL = [Integer, NilClass].freeze
      STATUS = [Resp::Status].freeze
      STATUS_OR_NIL = [Resp::Status, NilClass].freeze
      # [cursor, [names…]], the reply of SCAN and SSCAN.
      SCAN_SHAPE = lambda do |reply|
        reply.is_a?(Array) && reply.size == 2 && reply[0].is_a?(String) && reply[1].is_a?(Array) &&
          reply[1].all?(String)
      end

      def self.from_url(url)
        cluster = url.scheme == "redis+cluster"
        raise UrlError, "#{url.redacted}: #{url.scheme}:// needs a host" if url.hosts.empty?

        db = url.path.delete_prefix("/")
        raise UrlError, "#{url.redacted}: a Redis database is a number" unless db.empty? || db.match?(/\A\d{1,7}\z/)
        raise UrlError, "#{url.redacted}: a Redis Cluster has only database 0" if cluster && !db.empty? && db != "0"

        new(url.hosts, cluster: cluster, db: db.to_i, username: url.user, password: url.password,
                       prefix: url.take("prefix", ""), timeout: url.take_duration("timeout", 250),
                       connect_timeout: url.take_duration("connect_timeout", 500), pool: url.take_integer("pool", 4),
                       failures: url.take_integer("failures", 2), retry_after: url.take_duration("retry_after", 1000),
                       max_value: url.take_size("max_value", 64 << 20))
      end

      # `hosts`: StoreUrl::Host list (a Cluster's seeds). Times in ms, `max_value` in bytes.
      def initialize(hosts, cluster: false, db: 0, username: nil, password: nil, prefix: "", timeout: 250,
                     connect_timeout: 500, pool: 4, failures: 2, retry_after: 1000, max_value: 64 << 20)
        super(prefix: prefix)
        raise UrlError, "a standalone Redis store takes one host" if !cluster && hosts.size != 1

        RedisScripts.all # a gem without its scripts fails here, not at the first counter

        @cluster = cluster
        @address = hosts.map(&:to_s).join(",")
        @timeout = timeout / 1000.0
        @max_value = max_value
        @value_limits = Resp.limits(max_value).freeze
        # A cursor and at most SCAN_COUNT + SCAN_SLACK names (the page's array and the reply's own elements too).
        @scan_limits = Resp::Limits.new(SCAN_NAME_MAX, 3 + SCAN_COUNT + SCAN_SLACK,
                                        max_value + Resp::ALLOWANCE).freeze
        options = { username: username, password: password, db: db, pool: pool, timeout: timeout,
                    connect_timeout: connect_timeout }
        if cluster
          @nodes = RedisCluster.new(hosts, options)
        else
          host = hosts.first
          @node = RedisNode.new(host.host.delete_prefix("[").delete_suffix("]"), host.port, options)
        end
        @health = Health.new(@address, failures: failures, retry_after_ms: retry_after)
      end

      def server_errors
        { @address => @health.errors }
      end

      def get(key)
        stored = stored_key(key)
        answer(guarded { |deadline| on_key(deadline, stored, ["GET", stored], @value_limits, BULK_OR_NIL) })
      end

      # One MGET on a standalone server (a reply of as many values as keys, each at most max_value); on a Cluster,
      # the GETs of each node pipelined.
      def get_many(keys)
        return [] if keys.empty?

        stored = keys.map { |key| stored_key(key) }
        guarded do |deadline|
          if @cluster
            per_node(deadline, stored, BULK_OR_NIL, @value_limits) { |key| ["GET", key] }
          else
            limits = Resp.limits(@max_value, values: stored.size, elements: stored.size)
            shape = ->(reply) { reply.is_a?(Array) && reply.size == stored.size && reply.all?(VALUE) }
            answer(@node.call(deadline, ["MGET", *stored], limits, shape))
          end
        end
      end

      def set(key, value, ttl: nil)
        write(stored_key(key), value, ttl, nx: false)
        nil
      end

      def add(key, value, ttl: nil)
        write(stored_key(key), value, ttl, nx: true)
      end

      def incr(key, delta, ttl: nil, create: true)
        key = check_key(key)
        stored = stored_of(key)
        ttl_ms = ttl ? (ttl * 1000).ceil : 0
        reply = guarded do |deadline|
          script(deadline, "incr", stored, [Integer(delta), create ? 1 : 0, ttl_ms], INTEGER_OR_NIL)
        end
        if reply.is_a?(Resp::ErrorReply) && reply.message.include?("not an integer")
          raise NotACounter.new(BACKEND, "the value at #{key} is not a counter (#{reply.message})", server: @address)
        end

        answer(reply)
      end

      def delete_if(key, expected)
        stored = stored_key(key)
        reply = guarded do |deadline|
          script(deadline, "delete_if", stored, [expected], INTEGER)
        end
        answer(reply) == 1
      end

      def delete(key)
        stored = stored_key(key)
        answer(guarded { |deadline| on_key(deadline, stored, ["DEL", stored], Resp::SMALL, INTEGER) }) == 1
      end

      def delete_many(keys)
        stored = keys.map { |key| stored_key(key) }
        guarded { |deadline| delete_keys(deadline, stored) }
      end

      # FLUSHDB (every master of a Cluster) without a prefix; with one, a purge of the prefix "".
      def clear
        return purge_prefix("").then { nil } unless @keys.prefix.empty?

        masters.each { |node| answer(guarded { |deadline| node.call(deadline, ["FLUSHDB"], Resp::SMALL, STATUS) }) }
        nil
      end

      # Deletes the members of the tag's set, then the set (exact: once it returns, no reader sees them). Each page
      # of SSCAN and each batch of deletes is one request, bounded by `timeout`.
      def purge_tag(tag)
        set_key = @keys.internal("tag", check_tag(tag))
        members = []
        cursor = "0"
        loop do
          cursor, page = answer(guarded do |deadline|
            on_key(deadline, set_key, ["SSCAN", set_key, cursor, "COUNT", SCAN_COUNT], @scan_limits, SCAN_SHAPE)
          end)
          members.concat(page)
          break if cursor == "0"
        end
        deleted = members.uniq.each_slice(DELETE_BATCH).sum do |batch|
          guarded { |deadline| delete_keys(deadline, batch) }
        end
        guarded { |deadline| on_key(deadline, set_key, ["DEL", set_key], Resp::SMALL, INTEGER) }
        deleted
      end

      # SCAN MATCH <stored prefix>* on every master, deleting what it finds.
      def purge_prefix(prefix)
        prefix = check_prefix(prefix)
        pattern = "#{(@keys.prefix + prefix).gsub(/[*?\[\]\\]/) { |c| "\\#{c}" }}*"
        masters.sum do |node|
          total = 0
          cursor = "0"
          loop do
            cursor, found = answer(guarded do |deadline|
              node.call(deadline, ["SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT], @scan_limits, SCAN_SHAPE)
            end)
            total += found.each_slice(DELETE_BATCH).sum { |batch| guarded { |deadline| delete_keys(deadline, batch) } }
            break if cursor == "0"
          end
          total
        end
      end

      def close
        (@node || @nodes).close
      end

      private

      def write(stored, value, ttl, nx:) # rubocop:disable Naming/MethodParameterName
        header = Base.entry_header(value) # read once, for the expiry and the tags
        expiry = Base.expiry_ms(value, ttl, header: header)
        if expiry && expiry <= Larder.now_ms
          guarded { |deadline| on_key(deadline, stored, ["DEL", stored], Resp::SMALL, INTEGER) } unless nx
          return false
        end
        set = ["SET", stored, value]
        set.push("PXAT", expiry) if expiry
        set.push("NX") if nx
        tags = (header&.tags || []).map { |tag| [@keys.internal("tag", tag), [stored, expiry || 0]] }
        guarded do |deadline|
          if @cluster || nx || tags.empty?
            done = answer(on_key(deadline, stored, set, Resp::SMALL, STATUS_OR_NIL))
            next false if done.nil?

            tags.each { |tag_key, args| answer(script(deadline, "tag", tag_key, args, INTEGER)) }
          else
            write_pipelined(deadline, set, tags)
          end
          true
        end
      end

      # The SET and the tag scripts in one round trip; a tag script the server did not have yet is sent again by
      # EVAL (which also loads it), after the pipeline: adding a member twice changes nothing.
      def write_pipelined(deadline, set, tags)
        requests = [[set, Resp::SMALL, STATUS_OR_NIL],
                    *tags.map { |tag_key, args| [evalsha("tag", tag_key, args), Resp::SMALL, INTEGER] }]
        replies = @node.pipeline(deadline, requests)
        answer(replies.shift)
        tags.zip(replies).each do |(tag_key, args), reply|
          answer(noscript?(reply) ? script(deadline, "tag", tag_key, args, INTEGER) : reply)
        end
      end

      # A script of spec/redis/ on `key`'s node: EVALSHA, then EVAL when the server answers NOSCRIPT (after a
      # restart, a SCRIPT FLUSH, or on a node that never ran it).
      def script(deadline, name, key, args, shape)
        reply = on_key(deadline, key, evalsha(name, key, args), Resp::SMALL, shape)
        return reply unless noscript?(reply)

        on_key(deadline, key, ["EVAL", RedisScripts.fetch(name).source, "1", key, *args], Resp::SMALL, shape)
      end

      def evalsha(name, key, args)
        ["EVALSHA", RedisScripts.fetch(name).sha1, "1", key, *args]
      end

      def noscript?(reply)
        reply.is_a?(Resp::ErrorReply) && reply.code == "NOSCRIPT"
      end

      # DEL of `keys`: in batches on a standalone server, one key per command on a Cluster (keys of one DEL must
      # share a slot), pipelined per node. The number deleted.
      def delete_keys(deadline, keys)
        return 0 if keys.empty?
        return answer(@node.call(deadline, ["DEL", *keys], Resp::SMALL, INTEGER)) unless @cluster

        per_node(deadline, keys, INTEGER, Resp::SMALL) { |key| ["DEL", key] }.sum
      end

      # On a Cluster, the replies for `keys` in their order: the commands for each node pipelined; a key whose
      # reply is a redirection is sent again on its own, following it.
      def per_node(deadline, keys, shape, limits, &command)
        replies = Array.new(keys.size)
        keys.each_index.group_by { |i| @nodes.node_for(keys[i], deadline) }.each do |node, indexes|
          answers = node.pipeline(deadline, indexes.map { |i| [command.call(keys[i]), limits, shape] })
          indexes.zip(answers).each do |i, reply|
            reply = @nodes.call(deadline, keys[i], command.call(keys[i]), limits, shape) if @nodes.redirection(reply)
            replies[i] = answer(reply)
          end
        end
        replies
      end

      def on_key(deadline, stored, command, limits, shape)
        if @cluster
          @nodes.call(deadline, stored, command, limits, shape)
        else
          @node.call(deadline, command, limits, shape)
        end
      end

      def masters
        return [@node] unless @cluster

        guarded { |deadline| @nodes.masters(deadline) }
      end

      # An error reply is the server's answer (not a failure): the store's error, naming it.
      def answer(reply)
        raise StoreError.new(BACKEND, "the server answered #{reply.message[0, 200]}", server: @address) if
          reply.is_a?(Resp::ErrorReply)

        reply
      end

      # Runs the block with the operation's deadline; a failure counts against a standalone server (which is ejected
      # after `failures` of them, then probed by one request at a time: spec/STORES.md §1) and is raised as the
      # store's error. A request the server's health refuses fails at once.
      def guarded(&)
        admitted = @cluster || @health.admit
        unless admitted
          @health.refused
          raise StoreError.new(BACKEND, "server ejected after repeated failures", server: @address)
        end
        begin
          answered(&)
        ensure
          @health.probe_over if admitted == Health::PROBE
        end
      end

      def answered
        result = yield Connection.clock + @timeout
        @health.success
        result
      rescue StoreError
        @health.success
        raise
      rescue Connection::Failure => e
        @cluster ? @health.refused : @health.failure
        raise StoreError.new(BACKEND, e.message, server: @address)
      end
    end
  end
end
