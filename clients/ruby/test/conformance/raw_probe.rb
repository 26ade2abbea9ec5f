# frozen_string_literal: true

require "socket"
require "io/wait"
require "digest"

module Conformance
  # The raw probes of spec/vectors/README.md (hostile_keys.json): a few lines of socket code of their own, written
  # from the protocols, that send a key's bytes exactly as given and never see it as a string, so that what a store
  # wrote is looked at from outside its code. Used by the conformance runner and by the store tests
  # (test/support/key_safety.rb).
  module RawProbe
    TIMEOUT = 5

    # A short-lived connection to "host:port", closed after the block.
    class Link
      def initialize(address)
        host, port = address.split(":")
        @socket = Socket.tcp(host, Integer(port), connect_timeout: TIMEOUT)
        @buffer = "".b
      end

      def write(bytes)
        @socket.write(bytes)
      end

      def line
        until (index = @buffer.index("\r\n"))
          read_more
        end
        @buffer.slice!(0, index + 2).byteslice(0, index)
      end

      # `count` bytes and the CR LF after them.
      def block(count)
        read_more while @buffer.bytesize < count + 2
        data = @buffer.slice!(0, count + 2)
        raise "a data block not followed by CR LF" unless data.byteslice(count, 2) == "\r\n"

        data.byteslice(0, count)
      end

      def close
        @socket.close
      end

      private

      def read_more
        raise "no answer within #{TIMEOUT}s" unless @socket.wait_readable(TIMEOUT)

        chunk = @socket.read_nonblock(65_536, exception: false)
        raise "the server closed the connection" if chunk.nil?

        @buffer << chunk unless chunk == :wait_readable
      end
    end

    module_function

    def with(address)
      link = Link.new(address)
      yield link
    ensure
      link&.close
    end

    # The value of the file store's file for the stored key `key_bytes` (spec/STORES.md §7:
    # <root>/<h[0..2]>/<h[2..4]>/<h>, h the SHA-256 of the key's bytes; "LDR1", expires_at u64 LE, key length u16 LE,
    # the key, the value), or nil when there is none. Raises when the header's key is not exactly `key_bytes`.
    def file_value(root, key_bytes)
      hash = Digest::SHA256.hexdigest(key_bytes.b)
      path = File.join(root, hash[0, 2], hash[2, 2], hash)
      return nil unless File.file?(path)

      raw = File.binread(path)
      raise "#{path}: no LDR1 magic" unless raw.byteslice(0, 4) == "LDR1".b

      length = raw.byteslice(12, 2).unpack1("S<")
      key = raw.byteslice(14, length)
      raise "#{path}: its header holds the key #{key.unpack1('H*')}, not #{key_bytes.unpack1('H*')}" unless
        key == key_bytes.b

      raw.byteslice((14 + length)..)
    end

    # memcached `mg <bytes> v`: the value's bytes, or nil (EN).
    def memcached_get(address, key_bytes)
      with(address) do |link|
        link.write("mg ".b + key_bytes.b + " v\r\n".b)
        answer = link.line
        next nil if answer == "EN"
        raise "mg answered #{answer.inspect}" unless (size = answer[/\AVA (\d+)/, 1])

        link.block(size.to_i)
      end
    end

    def memcached_flush(address)
      with(address) do |link|
        link.write("flush_all\r\n")
        answer = link.line
        raise "flush_all answered #{answer.inspect}" unless answer == "OK"
      end
    end

    # One Redis command (its arguments' bytes as bulk strings): a String (bulk or status), an Integer, or nil. An
    # error reply raises.
    def redis(address, *args)
      with(address) do |link|
        command = "*#{args.size}\r\n".b
        args.each { |arg| command << "$#{arg.to_s.bytesize}\r\n".b << arg.to_s.b << "\r\n".b }
        link.write(command)
        answer = link.line
        case answer.getbyte(0)
        when 36 then answer == "$-1" ? nil : link.block(answer.byteslice(1..).to_i) # $
        when 58 then answer.byteslice(1..).to_i # :
        when 43 then answer.byteslice(1..) # +
        else raise "#{args.first} answered #{answer.inspect}"
        end
      end
    end
  end
end
