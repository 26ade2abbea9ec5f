# frozen_string_literal: true

require_relative "resp"

module Larder
  module Stores
    # The Redis servers larder's Redis store talks to, over its own bounded RESP client (Resp): a standalone server
    # (RedisNode) or a Cluster (RedisCluster: slots from CLUSTER SLOTS, keys to slots by CRC16 with Redis's hash-tag
    # rule, MOVED and ASK followed). Larder's own client rather than the redis gem because the gem (4.8 here) cannot
    # bound what it reads (a 1 GiB bulk string is read whole, nested arrays recurse until SystemStackError) nor
    # bound an operation in total rather than per read, and its Cluster client runs its own start-up commands over
    # the same unbounded reader; a driver class for the gem would have had to fight both. This one is small: the
    # store's commands only, a pool of connections per node, every read under per-command limits and one deadline.
    #
    # Every method takes the operation's deadline (monotonic seconds) and raises Connection::Failure for anything
    # that must count against a server; error replies come back as Resp::ErrorReply.
    class RedisNode
      attr_reader :address

      def initialize(host, port, options)
        @host = host
        @port = port
        @address = "#{host.include?(':') ? "[#{host}]" : host}:#{port}"
        handshake = handshake_commands(options)
        @pool = ConnectionPool.new(host, port, size: options[:pool], timeout_ms: options[:timeout],
                                               connect_timeout_ms: options[:connect_timeout]) do |connection|
          handshake.each do |command|
            connection.write(Resp.command(*command))
            reply = Resp.read(connection, Resp::SMALL)
            raise Connection::Failure, "#{command.first} refused: #{reply_text(reply)}" unless reply == Resp::OK
          end
        end
      end

      # The replies to `requests` ([command, limits, shape] each; a command is a list of arguments), sent in one
      # write on one connection; each reply is read under its limits and checked against its shape (Resp.checked)
      # while the connection is still lent, so a bad reply closes it.
      def pipeline(deadline, requests)
        @pool.with(deadline) do |connection|
          connection.write(requests.map { |command, _, _| Resp.command(*command) }.join)
          requests.map { |_, limits, shape| Resp.checked(Resp.read(connection, limits), shape) }
        end
      end

      # The reply to one command (see pipeline).
      def call(deadline, command, limits, shape)
        @pool.with(deadline) do |connection|
          connection.write(Resp.command(*command))
          Resp.checked(Resp.read(connection, limits), shape)
        end
      end

      def close
        @pool.close
      end

      private

      def handshake_commands(options)
        commands = []
        commands << ["AUTH", options[:username], options[:password]].compact if options[:password]
        commands << ["SELECT", options[:db].to_s] if options[:db].to_i.positive?
        commands
      end

      def reply_text(reply)
        (reply.is_a?(Resp::ErrorReply) ? reply.message : reply.inspect).byteslice(0, 120).inspect
      end
    end

    # A Redis Cluster: the seeds' slot map, one RedisNode per node, redirections followed (at most MAX_REDIRECTS per
    # command, all within the command's deadline).
    class RedisCluster
      SLOTS = 16_384
      MAX_REDIRECTS = 5
      # CLUSTER SLOTS: a few elements per slot range and node.
      SLOTS_LIMITS = Resp::Limits.new(Connection::MAX_LINE, 1_000_000, 64 << 20).freeze

      def initialize(seeds, options)
        @seeds = seeds.map { |host| [host.host.delete_prefix("[").delete_suffix("]"), host.port] }
        @options = options
        @nodes = {}
        @slots = nil
        @mutex = Mutex.new
      end

      # The node of a key, from the slot map (read from a seed the first time, and again after a MOVED).
      def node_for(key, deadline)
        slots(deadline)[RedisCluster.slot(key)] || raise(Connection::Failure, "no node serves the slot of #{key}")
      end

      # The masters, from the slot map.
      def masters(deadline)
        slots(deadline).compact.uniq
      end

      # A command on one key's node, following MOVED (the slot map is read again) and ASK (ASKING first).
      def call(deadline, key, command, limits, shape)
        node = node_for(key, deadline)
        asking = false
        MAX_REDIRECTS.times do
          reply = if asking
                    node.pipeline(deadline, [[["ASKING"], Resp::SMALL, [Resp::Status]], [command, limits, shape]]).last
                  else
                    node.call(deadline, command, limits, shape)
                  end
          redirect = redirection(reply)
          return reply unless redirect

          kind, address = redirect
          @mutex.synchronize { @slots = nil } if kind == "MOVED"
          node = node_at(*address)
          asking = kind == "ASK"
        end
        raise Connection::Failure, "more than #{MAX_REDIRECTS} redirections for #{key}"
      end

      # ["MOVED" or "ASK", [host, port]] for a redirection reply, else nil.
      def redirection(reply)
        return nil unless reply.is_a?(Resp::ErrorReply) && %w[MOVED ASK].include?(reply.code)

        kind, _slot, address = reply.message.split(" ", 3)
        host, _, port = address.to_s.rpartition(":")
        raise Connection::Failure, "malformed redirection #{reply.message[0, 80].inspect}" unless
          port.match?(/\A\d{1,5}\z/) && !host.empty?

        [kind, [host.delete_prefix("[").delete_suffix("]"), port.to_i]]
      end

      def close
        @mutex.synchronize { @nodes.each_value(&:close) }
      end

      # The slot of a key (CRC16-XMODEM of the key, or of its first non-empty {hash tag}, mod 16384).
      def self.slot(key)
        key = key.b
        open = key.index("{")
        if open
          close = key.index("}", open + 1)
          key = key.byteslice(open + 1, close - open - 1) if close && close > open + 1
        end
        crc = 0
        key.each_byte { |byte| crc = ((crc << 8) & 0xFF00) ^ CRC16[((crc >> 8) ^ byte) & 0xFF] }
        crc % SLOTS
      end

      CRC16 = Array.new(256) do |i|
        crc = i << 8
        8.times { crc = crc.nobits?(0x8000) ? (crc << 1) : ((crc << 1) ^ 0x1021) }
        crc & 0xFFFF
      end.freeze

      private

      def node_at(host, port)
        @mutex.synchronize { @nodes[[host, port]] ||= RedisNode.new(host, port, @options) }
      end

      def slots(deadline)
        current = @mutex.synchronize { @slots }
        return current if current

        map = load_slots(deadline)
        @mutex.synchronize { @slots = map }
      end

      # CLUSTER SLOTS from the known nodes, seeds first; the first that answers with a map wins.
      def load_slots(deadline)
        failure = nil
        candidates = (@seeds + @mutex.synchronize { @nodes.keys }).uniq
        candidates.each do |host, port|
          reply = node_at(host, port).call(deadline, %w[CLUSTER SLOTS], SLOTS_LIMITS, [Array])
          return slot_map(reply, host) unless reply.is_a?(Resp::ErrorReply)

          failure = Connection::Failure.new("CLUSTER SLOTS refused by #{host}:#{port}: #{reply.message[0, 80]}")
        rescue Connection::Failure => e
          failure = e
          raise if Connection.clock >= deadline
        end
        raise failure || Connection::Failure.new("no Redis Cluster seed answered")
      end

      # [[start, end, [ip, port, id, …], replicas…], …] as an Array of 16384 nodes (nil where no node serves).
      def slot_map(reply, asked_host)
        raise Connection::Failure, "CLUSTER SLOTS: not a list" unless reply.is_a?(Array)

        map = Array.new(SLOTS)
        reply.each do |range|
          first, last, master = range if range.is_a?(Array)
          unless first.is_a?(Integer) && last.is_a?(Integer) && first >= 0 && first <= last &&
                 last < SLOTS && master.is_a?(Array) && master[0].is_a?(String) && master[1].is_a?(Integer)
            raise Connection::Failure, "CLUSTER SLOTS: a malformed slot range"
          end

          host = master[0].empty? ? asked_host : master[0].force_encoding(Encoding::UTF_8)
          node = node_at(host, master[1])
          (first..last).each { |slot| map[slot] = node }
        end
        map
      end
    end
  end
end
