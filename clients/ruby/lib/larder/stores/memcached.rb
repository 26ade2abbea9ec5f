# frozen_string_literal: true

require_relative "remote"
require_relative "../ring"

module Larder
  module Stores
    # A pool of memcached servers (spec/STORES.md §4): the meta protocol (`mg`/`ms`/`md`/`ma`/`mn`), keys spread by
    # the ketama ring, pipelined multi-gets per server, failure ejection with the ring rebuilt from the others (§4.3),
    # and purge by tag and prefix as records checked on read (§4.4).
    class Memcached < Base
      BACKEND = "memcached"
      THIRTY_DAYS = 2_592_000
      ITEM_OVERHEAD = 50
      MAX_PREFIX_LINES = 1000
      # A value line, its size of at most 10 digits, then flags or nothing.
      VALUE_LINE = /\AVA \d{1,10}(?: |\z)/n
      # The meta no-op that ends every request: its MN must come right after the replies the request can get, so a
      # server that answers more (issue 32's wide reply: values after a get's) is refused at the first reply too many.
      NOOP = "mn\r\n"
      # What a request's replies may take besides their values (lines, CR LFs): spec/STORES.md §2 allows 64 KiB.
      ALLOWANCE = 16 << 10
      # How batched finds an item's stored key (made once, not per request).
      ITSELF = :itself.to_proc
      FIRST = :first.to_proc

      # One memcached server: its address, health and idle connections.
      class Server
        attr_reader :address, :health, :weight

        def initialize(host, weight, options)
          @address = host.to_s
          @weight = weight
          @health = Health.new(@address, failures: options[:failures], retry_after_ms: options[:retry_after])
          @pool = ConnectionPool.new(host.host, host.port, size: options[:pool], timeout_ms: options[:timeout],
                                                           connect_timeout_ms: options[:connect_timeout])
        end

        # Runs the block on a connection, all of it before `deadline`. A Connection::Failure (connect, timeout, a
        # reply out of bounds or malformed) is raised for the caller to count; a reply read in full (a value, or an
        # error answer raised as a StoreError) resets the server's failure count. While the server is ejected, or on
        # probation with another request's probe out (spec/STORES.md §1), the request is refused at once.
        def request(deadline, &)
          admitted = @health.admit
          unless admitted
            @health.refused
            raise StoreError.new(BACKEND, "server ejected after repeated failures", server: @address)
          end
          begin
            answer(deadline, &)
          ensure
            @health.probe_over if admitted == Health::PROBE
          end
        end

        def close
          @pool.close
        end

        private

        def answer(deadline, &)
          result = @pool.with(deadline, &)
          @health.success
          result
        rescue StoreError
          @health.success
          raise
        end
      end

      def self.from_url(url)
        raise UrlError, "#{url.redacted}: memcached:// needs at least one host" if url.hosts.empty?

        weights = url.take("weights")&.split(",")&.map do |w|
          Integer(w, exception: false) || raise(UrlError, "bad weight #{w}")
        end
        new(url.hosts, weights: weights, prefix: url.take("prefix", ""), timeout: url.take_duration("timeout", 250),
                       connect_timeout: url.take_duration("connect_timeout", 500), pool: url.take_integer("pool", 2),
                       failures: url.take_integer("failures", 2), retry_after: url.take_duration("retry_after", 5000),
                       max_item: url.take_size("max_item", 1 << 20), prefix_purge: url.take_bool("prefix_purge", true),
                       purge_skew: url.take_duration("purge_skew", 1000),
                       purge_retention: url.take_duration("purge_retention", 30 * 86_400_000))
      end

      # `hosts`: StoreUrl::Host list (or "host:port" strings). Times in ms.
      def initialize(hosts, weights: nil, prefix: "", timeout: 250, connect_timeout: 500, pool: 2, failures: 2,
                     retry_after: 5000, max_item: 1 << 20, prefix_purge: true, purge_skew: 1000,
                     purge_retention: 30 * 86_400_000)
        super(prefix: prefix)
        hosts = hosts.map { |h| h.is_a?(String) ? StoreUrl::Host.new(*h.split(":").then { |a, b| [a, b.to_i] }) : h }
        weights ||= [1] * hosts.size
        raise UrlError, "weights lists #{weights.size} numbers for #{hosts.size} servers" if weights.size != hosts.size

        options = { timeout: timeout, connect_timeout: connect_timeout, pool: pool, failures: failures,
                    retry_after: retry_after }
        @servers = hosts.zip(weights).map { |host, weight| Server.new(host, weight, options) }
        @max_item = max_item
        @timeout = timeout
        @prefix_purge = prefix_purge
        @purge_skew = purge_skew
        @purge_retention = purge_retention
        @ring_mutex = Mutex.new
        @ring_key = nil
      end

      # Failures counted per server since the store was opened ("host:port" => count).
      def server_errors
        @servers.to_h { |server| [server.address, server.health.errors] }
      end

      # The index of the server a stored key goes to, with the servers available now.
      def server_index(stored_key)
        if @servers.size == 1 # what a ring of one answers, without hashing the key on every request
          return 0 if @servers[0].health.available?

          @servers[0].health.refused
          raise StoreError.new(BACKEND, "every server is ejected", server: @servers[0].address)
        end
        ring&.server(stored_key) || raise(StoreError.new(BACKEND, "every server is ejected"))
      end

      # get_many of one key, without its lists.
      def get(key)
        key = check_key(key)
        stored = stored_of(key)
        deadline = deadline_from_now
        found = multi_get(@prefix_purge ? [stored, prefixes_key] : [stored], deadline)
        value = found[stored]
        return nil if value.nil?

        purge_check([key], [value], @prefix_purge ? parse_prefixes(found[prefixes_key]) : [], deadline).first
      end

      # One round trip per server (each key's `mg`, and the prefix list), then one more for the tag records of the
      # entries found. Every key is checked before anything is sent.
      def get_many(keys)
        keys = keys.map { |key| check_key(key) }
        stored = keys.map { |key| stored_of(key) }
        wanted = stored.dup
        wanted << prefixes_key if @prefix_purge
        deadline = deadline_from_now
        found = multi_get(wanted.uniq, deadline)
        values = stored.map { |key| found[key] }
        prefixes = @prefix_purge ? parse_prefixes(found[prefixes_key]) : []
        purge_check(keys, values, prefixes, deadline)
      end

      def set(key, value, ttl: nil)
        stored = checked(key, value)
        exptime = exptime_for(value, ttl)
        on_server(stored) do |connection|
          if exptime.nil?
            meta(connection, "md #{stored}\r\n", expect: %w[HD NF])
          else
            meta(connection, "ms #{stored} #{value.bytesize} T#{exptime} F0\r\n#{binary(value)}\r\n",
                 expect: %w[HD])
          end
        end
        nil
      end

      def set_many(items, ttl: nil)
        writes = items.map do |key, value|
          stored = checked(key, value)
          [stored, value, exptime_for(value, ttl)]
        end
        batched(writes, deadline_from_now, FIRST) do |connection, batch|
          request = batch.map do |stored, value, exptime|
            next "md #{stored}\r\n" if exptime.nil?

            "ms #{stored} #{value.bytesize} T#{exptime} F0\r\n#{binary(value)}\r\n"
          end.join
          answers(connection, request, batch.size, %w[HD NF])
        end
        nil
      end

      def add(key, value, ttl: nil)
        stored = checked(key, value)
        exptime = exptime_for(value, ttl)
        return false if exptime.nil?

        on_server(stored) do |connection|
          meta(connection, "ms #{stored} #{value.bytesize} T#{exptime} F0 ME\r\n#{binary(value)}\r\n",
               expect: %w[HD NS]) == "HD"
        end
      end

      def incr(key, delta, ttl: nil, create: true)
        key = check_key(key)
        stored = stored_of(key)
        mode = delta.negative? ? "MD" : "MI"
        command = +"ma #{stored} D#{Integer(delta).abs} #{mode} v"
        if create
          exptime = ttl ? relative_exptime(Larder.now_ms + (ttl * 1000).ceil) : 0
          command << " N#{exptime} J#{[delta, 0].max}"
        end
        on_server(stored) do |connection|
          connection.write("#{command}\r\n#{NOOP}")
          line = connection.read_line
          case line
          when /\AVA (\d{1,2})\z/
            value = counter(connection.read_bytes(Regexp.last_match(1).to_i))
            end_of_replies(connection)
            value
          when "NF" then end_of_replies(connection)
          when /\ACLIENT_ERROR .*non-numeric/
            end_of_replies(connection)
            raise NotACounter.new(BACKEND, "the value at #{key} is not a counter",
                                  server: @servers[server_index(stored)].address)
          else raise Connection::Failure, "unexpected answer #{shown(line)}"
          end
        end
      end

      def delete_if(key, expected)
        stored = stored_key(key)
        on_server(stored) do |connection|
          found, cas = value_and_cas(connection, stored)
          next false unless found == expected.b

          meta(connection, "md #{stored} C#{cas}\r\n", expect: %w[HD EX NF]) == "HD"
        end
      end

      def delete(key)
        stored = stored_key(key)
        on_server(stored) { |connection| meta(connection, "md #{stored}\r\n", expect: %w[HD NF]) == "HD" }
      end

      def delete_many(keys)
        stored = keys.map { |key| stored_key(key) }
        stored.count do |key|
          on_server(key) { |connection| meta(connection, "md #{key}\r\n", expect: %w[HD NF]) == "HD" }
        end
      end

      # `flush_all` on every server without a prefix; with one, a purge of the prefix "".
      def clear
        return purge_prefix("").then { nil } unless @keys.prefix.empty?

        deadline = deadline_from_now
        @servers.each_index do |index|
          on_index(index, nil, deadline) { |connection| meta(connection, "flush_all\r\n", expect: %w[OK]) }
        end
        nil
      end

      # Writes the tag's purge record: entries tagged with it and created up to now (+ skew) read as missing.
      # Answers nil (recorded: a record cannot count what it hides, spec/STORES.md §4.4).
      def purge_tag(tag)
        record = internal("tag", check_tag(tag))
        now = Larder.now_ms.to_s
        on_server(record) do |connection|
          meta(connection, "ms #{record} #{now.bytesize} T0 F0\r\n#{now}\r\n", expect: %w[HD])
        end
        nil
      end

      # Adds a line to the prefix list (read–modify–write with CAS, retried until it succeeds). Answers nil
      # (recorded), as purge_tag.
      def purge_prefix(prefix)
        prefix = check_prefix(prefix)
        raise Unsupported.new(BACKEND, "purge by prefix needs prefix_purge=true") unless @prefix_purge

        key = prefixes_key
        loop do
          stored = on_server(key) { |connection| update_prefixes(connection, key, prefix) }
          return nil if stored
        end
      end

      def close
        @servers.each(&:close)
      end

      private

      # Keys and values go into the protocol's lines as bytes: the UTF-8 bytes check_key checked.
      def stored_of(text)
        super.b
      end

      def binary(value)
        value.encoding == Encoding::BINARY ? value : value.b
      end

      def internal(purpose, name)
        @keys.internal(purpose, name).b
      end

      def prefixes_key
        @prefixes_key ||= internal("prefixes", "")
      end

      def deadline_from_now
        Connection.clock + (@timeout / 1000.0)
      end

      def update_prefixes(connection, key, prefix)
        old, cas = value_and_cas(connection, key)
        now = Larder.now_ms
        lines = parse_prefixes(old).reject { |time, _| time < now - @purge_retention }
        lines << [now, prefix]
        text = lines.last(MAX_PREFIX_LINES).map { |time, p| "#{time} #{p}\n" }.join
        mode = cas ? "C#{cas}" : "ME"
        meta(connection, "ms #{key} #{text.bytesize} T0 F0 #{mode}\r\n#{text}\r\n", expect: %w[HD NS EX NF]) == "HD"
      end

      # `mg <key> v c`: the value and its CAS token, or nil (EN).
      def value_and_cas(connection, key)
        connection.write("mg #{key} v c\r\n#{NOOP}")
        line = connection.read_line
        if line == "EN"
          end_of_replies(connection)
          return nil
        end

        size, flags = value_header(line)
        cas = flags["c"]
        raise Connection::Failure, "unexpected answer #{shown(line)}: no cas" unless cas&.match?(/\A\d{1,20}\z/)

        value = connection.read_bytes(size)
        end_of_replies(connection)
        [value, cas]
      end

      # The lines of a prefix list, [[ms, prefix]…]; lines that do not parse are skipped (anyone may write there).
      def parse_prefixes(text)
        return [] if text.nil?

        text.b.each_line.filter_map do |line|
          time, prefix = line.chomp.split(" ", 2)
          next unless time&.match?(/\A\d{1,19}\z/) && prefix

          prefix = prefix.force_encoding(Encoding::UTF_8)
          [time.to_i, prefix] if prefix.valid_encoding?
        end
      end

      # Values whose entry a purge record covers become nil (§4.4). `keys` are the caller's (unprefixed) keys.
      def purge_check(keys, values, prefixes, deadline)
        # No prefix record, and no entry whose flags announce tags: nothing to look up, no header to parse.
        return values if prefixes.empty? && values.none? { |value| tagged?(value) }

        headers = values.map { |value| value && Base.entry?(value) ? safe_header(value) : nil }
        tags = headers.compact.flat_map(&:tags).uniq
        records = tags.empty? ? {} : multi_get(tags.map { |tag| internal("tag", tag) }, deadline)
        keys.zip(values, headers).map do |key, value, header|
          next value if header.nil?

          created = header.created_at
          purged = prefixes.any? { |time, prefix| key.start_with?(prefix) && created <= time + @purge_skew } ||
                   header.tags.any? do |tag|
                     record = records[internal("tag", tag)]
                     record && created <= record.to_i + @purge_skew
                   end
          purged ? nil : value
        end
      end

      def tagged?(value)
        !value.nil? && Base.entry?(value) && value.bytesize > 6 && value.getbyte(6).anybits?(Header::FLAG_TAGS)
      end

      def safe_header(value)
        Header.read(value)
      rescue InvalidEntry
        nil
      end

      # stored key => value, for the keys found; one pipelined batch per server, within one deadline. The replies
      # pair with the keys by position (§4.1): each is `EN` or `VA <size>` with a size of at most max_item, then MN,
      # so a multi-get holds at most one item's worth per key asked, its lines within ALLOWANCE (the whole reply's
      # bound, §2); anything else is a Failure, at the first byte past the bound.
      def multi_get(stored_keys, deadline)
        found = {}
        batched(stored_keys, deadline, ITSELF) do |connection, batch|
          request = String.new(capacity: 64 * batch.size, encoding: Encoding::BINARY) # grows if the keys are longer
          batch.each { |key| request << "mg " << key << " v\r\n" }
          connection.write(request << NOOP)
          room = (batch.size * @max_item) + ALLOWANCE
          batch.each do |key|
            line = connection.read_line
            room -= line.bytesize + 2
            next if line == "EN"

            size = value_size(line)
            room -= size + 2
            raise Connection::Failure, "the replies hold more bytes than the request can get" if room.negative?

            found[key] = connection.read_bytes(size)
          end
          end_of_replies(connection)
        end
        found
      end

      # Runs the block with each server's connection and its batch of `items` (grouped by the stored key `key_of`
      # reads from an item), servers one after another within `deadline`. A batch whose
      # failure ejects its server is retried once with a deadline of its own, its items regrouped on the rebuilt
      # ring (§4.3: each key on its own new server; the keys of one ejected server move to several servers, so
      # sending them all to the first key's new server would read false misses and leave writes where no reader
      # looks).
      def batched(items, deadline, key_of, &work)
        groups = group_by_server(items, key_of)
        2.times do |attempt|
          ejected = []
          groups.each do |index, batch|
            server = @servers[index]
            server.request(deadline) { |connection| work.call(connection, batch) }
          rescue Connection::Failure => e
            retry_it = server.health.failure && attempt.zero? && ring
            raise StoreError.new(BACKEND, e.message, server: server.address) unless retry_it

            ejected.concat(batch)
          end
          break if ejected.empty?

          groups = group_by_server(ejected, key_of)
          deadline = deadline_from_now
        end
      end

      def group_by_server(items, key_of)
        return { server_index(nil) => items } if @servers.size == 1

        items.group_by { |item| server_index(key_of.call(item)) }
      end

      # The size of a `VA <size> <flags>*` line (value_header without the flags); a size beyond max_item is a Failure.
      def value_size(line)
        size = line.match?(VALUE_LINE) ? line.byteslice(3, 10).to_i : -1
        return value_header(line).first if size.negative? || size > @max_item

        size
      end

      # The size and flags ("k" => key, "c" => cas…) of a `VA <size> <flags>*` line; a size beyond max_item is a
      # Failure, before anything of the value is read.
      def value_header(line)
        tokens = line.split
        unless tokens[0] == "VA" && tokens[1]&.match?(/\A\d{1,10}\z/)
          raise Connection::Failure, "unexpected answer #{shown(line)}"
        end

        size = tokens[1].to_i
        raise Connection::Failure, "a #{size}-byte value is larger than max_item (#{@max_item})" if size > @max_item

        [size, tokens.drop(2).to_h { |token| [token[0], token[1..]] }]
      end

      # Sends `request` (one command) and the no-op; its one reply line, which must be in `expect`, then MN.
      def meta(connection, request, expect:)
        connection.write((+request) << NOOP)
        line = connection.read_line
        if expect.include?(line)
          end_of_replies(connection)
          return line
        end
        if line.include?("too large")
          end_of_replies(connection)
          raise TooLarge.new(BACKEND, "the server refused the value: #{shown(line)}")
        end

        raise Connection::Failure, "unexpected answer #{shown(line)}"
      end

      # Sends `commands` commands (not quiet: a server that says nothing has not answered) and the no-op: one line
      # in `expect` per command, then MN. A value too large is TooLarge, once MN is read; anything else a Failure.
      def answers(connection, request, commands, expect)
        connection.write((+request) << NOOP)
        refused = nil
        commands.times do
          line = connection.read_line
          next if expect.include?(line)
          raise Connection::Failure, "unexpected answer #{shown(line)}" unless line.include?("too large")

          refused ||= line
        end
        end_of_replies(connection)
        raise TooLarge.new(BACKEND, "the server refused a value: #{shown(refused)}") if refused
      end

      # The MN that must follow the replies a request can get: anything else is a server answering more than was
      # asked (out of step), refused before it is read further.
      def end_of_replies(connection)
        line = connection.read_line
        return nil if line == "MN"

        raise Connection::Failure, "malformed answer: #{shown(line)} where MN ends the replies: more replies than " \
                                   "the request can get"
      end

      # The number in a counter's value, which memcached may pad with spaces (spec/STORES.md §3).
      def counter(text)
        raise Connection::Failure, "a counter that is not a number: #{shown(text)}" unless text.match?(/\A\d+ *\z/)

        text.to_i
      end

      def shown(line)
        line.byteslice(0, 80).inspect
      end

      def checked(key, value)
        key = check_key(key)
        stored = stored_of(key)
        limit = @max_item - ITEM_OVERHEAD - stored.bytesize
        if value.bytesize > limit
          raise TooLarge.new(BACKEND, "value of #{value.bytesize} bytes at #{key} exceeds the #{limit}-byte item limit")
        end

        stored
      end

      # memcached's exptime for a value, 0 for never, nil when already past (spec/STORES.md §2).
      def exptime_for(value, ttl)
        expiry = Base.expiry_ms(value, ttl)
        return 0 if expiry.nil?

        now = Larder.now_ms
        return nil if expiry <= now

        relative_exptime(expiry, now)
      end

      def relative_exptime(expiry, now = Larder.now_ms)
        seconds = ((expiry - now) / 1000.0).ceil
        seconds > THIRTY_DAYS ? (expiry / 1000.0).ceil : [seconds, 1].max
      end

      def ring
        available = @servers.each_index.select { |index| @servers[index].health.available? }
        @ring_mutex.synchronize do
          if @ring_key != available
            @ring_key = available
            @ring = available.empty? ? nil : Ring.new(available.map { |i| server_spec(i) }, available)
          end
          @ring
        end
      end

      def server_spec(index)
        server = @servers[index]
        host = server.address.rpartition(":")
        [host.first, host.last.to_i, server.weight]
      end

      # Runs the block on the server of `stored_key`; when a failure ejects it, retries once on the key's new server.
      def on_server(stored_key, &)
        on_index(server_index(stored_key), stored_key, deadline_from_now, &)
      end

      # The retry after an ejection is a new request, with its own deadline: the key's new server is not blamed for
      # the time the failed one took.
      def on_index(index, stored_key, deadline, retried: false, &block)
        server = @servers[index]
        server.request(deadline, &block)
      rescue Connection::Failure => e
        ejected = server.health.failure
        if ejected && !retried && stored_key && (other = ring&.server(stored_key)) && other != index
          return on_index(other, stored_key, deadline_from_now, retried: true, &block)
        end

        raise StoreError.new(BACKEND, e.message, server: server.address)
      end
    end
  end
end
