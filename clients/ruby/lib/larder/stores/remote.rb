# frozen_string_literal: true

require "socket"
require "io/wait"

module Larder
  module Stores
    # Failure and recovery of one remote server (spec/STORES.md §1): consecutive failures counted, ejection for
    # `retry_after` after `failures` of them, then probation, a half-open circuit: one request at a time (the probe)
    # goes to the server, every other one is refused at once while it is out; its success puts the server back, its
    # failure ejects it again. Thread-safe; a healthy server's checks read two instance variables, without the lock.
    #
    # The stores call `admit` before each request and, when it answered PROBE, `probe_over` once the request ended
    # however it ended (after `success` or `failure`, which end the probation themselves; a request that raised
    # anything else leaves the next request to probe).
    class Health
      # What `admit` answers for the one request that probes a server whose ejection is over.
      PROBE = :probe

      attr_reader :name, :errors

      def initialize(name, failures:, retry_after_ms:)
        @name = name
        @limit = failures
        @retry_after_ms = retry_after_ms
        @count = 0
        # Set (under the lock) while the server is ejected and while it is on probation; nil when it is in service.
        @ejected_until = nil
        @probing = false
        @errors = 0
        @mutex = Mutex.new
      end

      # Whether the server is in service or its ejection is over (memcached keeps such a server on its ring). Takes
      # no probe: a request still asks `admit`.
      def available?(now = nil)
        ejected_until = @ejected_until
        ejected_until.nil? || (now || Larder.now_ms) >= ejected_until
      end

      # Whether a request may go to the server now: true in service, PROBE for the one request that probes it once
      # its ejection is over, false while it is ejected or while another request's probe is out.
      def admit(now = nil)
        return true if @ejected_until.nil? # the common case, without the lock (set only under it)

        now ||= Larder.now_ms
        @mutex.synchronize do
          return true if @ejected_until.nil?
          return false if now < @ejected_until || @probing

          @probing = true
          PROBE
        end
      end

      # The probe ended: when neither `success` nor `failure` ended the probation, the next request probes.
      def probe_over
        @mutex.synchronize { @probing = false }
      end

      # Whether a probe is out now.
      def probing?
        @probing
      end

      # A good answer: ends a failure streak, and puts a server on probation back in service.
      def success
        return if @count.zero? && @ejected_until.nil? # nothing to reset (the common case), without the lock

        @mutex.synchronize do
          @count = 0
          next unless @probing

          @probing = false
          @ejected_until = nil
        end
      end

      # Counts a failure; true if it ejected the server.
      def failure(now = Larder.now_ms)
        @mutex.synchronize do
          @errors += 1
          @count += 1
          return false unless @probing || @count >= @limit

          @ejected_until = now + @retry_after_ms
          @count = 0
          @probing = false
          true
        end
      end

      def refused
        @mutex.synchronize { @errors += 1 }
      end
    end

    # A TCP connection for the memcached and Redis protocols that bounds everything it reads (spec/STORES.md §2,
    # "Replies are hostile too"): every read and write waits at most until the operation's *total* deadline (a
    # server that drips one byte at a time is cut off like one that says nothing), a line is refused once it passes
    # MAX_LINE bytes without ending, and a data block is read only after its caller has checked its announced length.
    # Whatever goes wrong is a Failure: the caller counts it against the server and discards the connection.
    class Connection
      # The connection failed (connect, timeout, lost, a reply out of bounds or malformed): counts against its server.
      class Failure < StandardError; end

      # Longest reply line (a status, an error, a value header) before its CR LF.
      MAX_LINE = 8192
      CHUNK = 65_536

      def self.clock
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end

      # `deadline`: a monotonic time (Connection.clock) by which the connection must be made and the handshake done.
      def initialize(host, port, connect_timeout:, deadline:)
        @deadline = deadline
        @timeout_ms = nil
        left = [connect_timeout, deadline - Connection.clock].min
        raise Failure, "timed out connecting" if left <= 0

        @socket = Socket.tcp(host.delete_prefix("[").delete_suffix("]"), port, connect_timeout: left)
        @socket.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
        @buffer = String.new(capacity: CHUNK, encoding: Encoding::BINARY)
        @pos = 0
        @scratch = String.new(capacity: CHUNK, encoding: Encoding::BINARY)
      rescue SystemCallError, SocketError, IOError => e
        raise Failure, "cannot connect: #{e.message}"
      end

      # The operation's deadline (monotonic seconds) and its length in ms (for messages).
      def deadline!(deadline, timeout_ms)
        @deadline = deadline
        @timeout_ms = timeout_ms
      end

      # Writes all of `data` (its bytes, whatever its encoding) before the deadline.
      def write(data)
        until data.empty?
          written = @socket.write_nonblock(data, exception: false)
          if written == :wait_writable
            wait(:wait_writable)
          else
            data = data.byteslice(written, data.bytesize - written)
          end
        end
      rescue SystemCallError, IOError => e
        raise Failure, "connection lost: #{e.message}"
      end

      # The next line, without its CR LF (a binary String). A line longer than MAX_LINE is a Failure.
      def read_line
        until (index = @buffer.index("\r\n", @pos))
          raise Failure, "malformed answer: a line longer than #{MAX_LINE} bytes" if @buffer.bytesize - @pos > MAX_LINE

          fill
        end
        raise Failure, "malformed answer: a line longer than #{MAX_LINE} bytes" if index - @pos > MAX_LINE

        line = @buffer.byteslice(@pos, index - @pos)
        consume(index + 2)
        line
      end

      # The next `count` bytes, which must be followed by CR LF. The caller bounds `count` first.
      def read_bytes(count)
        fill(count + 2) while @buffer.bytesize - @pos < count + 2
        if @buffer.getbyte(@pos + count) != 13 || @buffer.getbyte(@pos + count + 1) != 10 # CR LF
          raise Failure, "malformed answer: data block not followed by CRLF"
        end

        data = @buffer.byteslice(@pos, count)

        consume(@pos + count + 2)
        data
      end

      # Whether unread bytes are waiting (a connection with some is out of step and must not be reused).
      def pending?
        @buffer.bytesize > @pos
      end

      def close
        @socket.close
      rescue IOError
        nil
      end

      private

      def consume(to)
        if to >= @buffer.bytesize
          @buffer.clear
          @pos = 0
        else
          @pos = to
        end
      end

      # Reads what is there (at least one byte, up to what the caller still needs); waits only until the deadline.
      # Bytes already received are taken even past it: what the callers read is bounded in size, so a flood ends
      # at its bound, and a reply that arrived in time is not blamed on a slower server read before it.
      def fill(wanted = CHUNK)
        if @pos.positive?
          @buffer = @buffer.byteslice(@pos, @buffer.bytesize - @pos)
          @pos = 0
        end
        loop do
          chunk = @socket.read_nonblock(wanted.clamp(CHUNK, 16 * CHUNK), @scratch, exception: false)
          case chunk
          when :wait_readable then wait(:wait_readable)
          when nil then raise Failure, "connection closed by the server"
          else
            @buffer << chunk
            return
          end
        end
      rescue SystemCallError, IOError => e
        raise Failure, "connection lost: #{e.message}"
      end

      def wait(direction)
        left = @deadline - Connection.clock
        raise Failure, timed_out if left <= 0 || !@socket.public_send(direction, left)
      end

      def timed_out
        @timeout_ms ? "timed out after #{@timeout_ms} ms" : "timed out"
      end
    end

    # The idle connections to one server (up to `size` kept), each made within the operation's deadline and
    # introduced by the handshake block (Redis: AUTH, SELECT). `with` lends one to a block: a block that returns,
    # or raises a StoreError after reading its whole reply (an error answer), gives the connection back; anything
    # else (a Failure, a bug) closes it, since it may be out of step. Exceptions Ruby's own methods raise on a reply
    # that does not parse become a Failure.
    class ConnectionPool
      MALFORMED = [ArgumentError, IndexError, TypeError, RangeError, EncodingError].freeze

      def initialize(host, port, size:, connect_timeout_ms:, timeout_ms:, &handshake)
        @host = host
        @port = port
        @size = size
        @connect_timeout = connect_timeout_ms / 1000.0
        @timeout_ms = timeout_ms
        @handshake = handshake
        @idle = []
        @mutex = Mutex.new
      end

      def with(deadline)
        connection = @mutex.synchronize { @idle.pop } || connect(deadline)
        connection.deadline!(deadline, @timeout_ms)
        answered = false
        result = yield connection
        answered = true
        result
      rescue StoreError
        answered = true
        raise
      rescue *MALFORMED => e
        raise Connection::Failure, "malformed answer (#{e.class}: #{e.message})"
      ensure
        give_back(connection, answered) if connection
      end

      def close
        @mutex.synchronize { @idle.each(&:close).clear }
      end

      private

      def give_back(connection, answered)
        keep = answered && !connection.pending? && @mutex.synchronize { @idle.size < @size && @idle.push(connection) }
        connection.close unless keep
      end

      def connect(deadline)
        connection = Connection.new(@host, @port, connect_timeout: @connect_timeout, deadline: deadline)
        connection.deadline!(deadline, @timeout_ms)
        begin
          @handshake&.call(connection)
        rescue StandardError
          connection.close
          raise
        end
        connection
      end
    end
  end
end
