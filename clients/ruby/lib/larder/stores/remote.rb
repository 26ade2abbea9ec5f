# frozen_string_literal: true

require "socket"

module Larder
  module Stores
    # Failure and recovery of one remote server (spec/STORES.md §1): consecutive failures counted, ejection for
    # `retry_after` after `failures` of them, then probation (one failure ejects again). Thread-safe.
    class Health
      attr_reader :name, :errors

      def initialize(name, failures:, retry_after_ms:)
        @name = name
        @limit = failures
        @retry_after_ms = retry_after_ms
        @count = 0
        @ejected_until = nil
        @probation = false
        @errors = 0
        @mutex = Mutex.new
      end

      # Whether requests may go to the server now (an ejected server comes back on probation after retry_after).
      def available?(now = Larder.now_ms)
        @mutex.synchronize do
          return true if @ejected_until.nil?
          return false if now < @ejected_until

          @ejected_until = nil
          @probation = true
          true
        end
      end

      def success
        @mutex.synchronize do
          @count = 0
          @probation = false
        end
      end

      # Counts a failure; true if it ejected the server.
      def failure(now = Larder.now_ms)
        @mutex.synchronize do
          @errors += 1
          @count += 1
          return false unless @probation || @count >= @limit

          @ejected_until = now + @retry_after_ms
          @count = 0
          @probation = false
          true
        end
      end

      def refused
        @mutex.synchronize { @errors += 1 }
      end
    end

    # A TCP connection with deadlines on every read and write, for the memcached protocol.
    class Connection
      # The connection failed (connect, timeout, lost): counts against its server.
      class Failure < StandardError; end

      def initialize(host, port, connect_timeout:, timeout:)
        @timeout = timeout
        @socket = Socket.tcp(host.delete_prefix("[").delete_suffix("]"), port, connect_timeout: connect_timeout)
        @socket.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
        @buffer = String.new(encoding: Encoding::BINARY)
      rescue SystemCallError, SocketError, IOError => e
        raise Failure, "cannot connect: #{e.message}"
      end

      def deadline!
        @deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + @timeout
      end

      def write(data)
        data = data.b
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

      def read_line
        until (index = @buffer.index("\r\n"))
          fill
        end
        line = @buffer.byteslice(0, index)
        @buffer = @buffer.byteslice(index + 2, @buffer.bytesize - index - 2)
        line
      end

      def read_bytes(count)
        fill while @buffer.bytesize < count + 2
        data = @buffer.byteslice(0, count)
        raise Failure, "malformed answer: data block not followed by CRLF" if @buffer.byteslice(count, 2) != "\r\n"

        @buffer = @buffer.byteslice(count + 2, @buffer.bytesize - count - 2)
        data
      end

      def close
        @socket.close
      rescue IOError
        nil
      end

      private

      def fill
        chunk = @socket.read_nonblock(65_536, exception: false)
        case chunk
        when :wait_readable then wait(:wait_readable)
        when nil then raise Failure, "connection closed by the server"
        else @buffer << chunk
        end
      rescue SystemCallError, IOError => e
        raise Failure, "connection lost: #{e.message}"
      end

      def wait(direction)
        left = @deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        raise Failure, "timed out after #{(@timeout * 1000).round} ms" if left <= 0 || !@socket.public_send(direction,
                                                                                                            left)
      end
    end
  end
end
