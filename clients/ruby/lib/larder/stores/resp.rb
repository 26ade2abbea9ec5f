# frozen_string_literal: true

require_relative "remote"

module Larder
  module Stores
    # RESP2, Redis's protocol, as larder's Redis store speaks it: commands encoded as arrays of bulk strings, and
    # replies read under bounds given per command (spec/STORES.md §2, "Replies are hostile too" and "Whole reply"): a
    # bulk string no longer than `max_bulk` (refused when its length is announced, before it is read), at most
    # `max_elements` elements in all the reply's arrays at any depth (refused when an array announces more than are
    # left), at most `max_bytes` in the whole reply, its lines and CR LFs included (counted as it is read: a bulk
    # string announced past what is left is refused before any of it is read), arrays nested at most MAX_DEPTH deep,
    # lines at most Connection::MAX_LINE. Anything else, or anything that does not parse, is a Connection::Failure.
    # An error reply (`-ERR …`) is an answer, returned as an ErrorReply, not a failure.
    #
    # It exists because the redis gem (4.8 on Debian 12) reads whatever a server announces (a 1 GiB bulk string,
    # arrays nested until the stack overflows) and bounds each read, not the operation, in time.
    module Resp
      # Redis replies nest at most this deep (larder's commands need 3: CLUSTER SLOTS).
      MAX_DEPTH = 8
      INTEGER = /\A-?\d{1,19}\z/
      LENGTH = /\A(?:-1|\d{1,10})\z/

      # An error reply: the server's answer to a command it refused.
      ErrorReply = Struct.new(:message) do
        def code
          message[/\A\S+/]
        end
      end

      # A status reply (`+OK`).
      Status = Struct.new(:text)
      OK = Status.new("OK").freeze

      # What one reply may hold. `max_elements` and `max_bytes` are totals for the whole reply.
      Limits = Struct.new(:max_bulk, :max_elements, :max_bytes)

      # A whole reply's bytes besides its values (its lines and CR LFs): spec/STORES.md §2 allows at most 64 KiB.
      ALLOWANCE = 16 << 10

      # For replies that are a status, an integer or an error: no array, bulk strings of one line's worth.
      SMALL = Limits.new(Connection::MAX_LINE, 0, ALLOWANCE).freeze

      # For a command answered by at most `values` values of at most `max_value` bytes each and `elements` elements.
      def self.limits(max_value, values: 1, elements: 0)
        Limits.new(max_value, elements, (values * max_value) + ALLOWANCE)
      end

      module_function

      # The RESP encoding of a command (every argument as a bulk string), as binary bytes.
      def command(*args)
        out = String.new(capacity: args.sum { |arg| arg.is_a?(String) ? arg.bytesize + 16 : 32 } + 16,
                         encoding: Encoding::BINARY)
        out << "*" << args.size.to_s << "\r\n"
        args.each do |arg|
          arg = arg.to_s
          arg = arg.b unless arg.encoding == Encoding::BINARY || arg.ascii_only?
          out << "$" << arg.bytesize.to_s << "\r\n" << arg << "\r\n"
        end
        out
      end

      # One reply: a Status, a (binary) String, an Integer, nil, an Array, or an ErrorReply.
      def read(connection, limits)
        Reader.new(connection, limits).reply(0)
      end

      # `reply` if it is an ErrorReply or of a shape the command can get: `shape` is a list of classes, or a Proc
      # that says whether the reply fits. Otherwise a Failure (spec/STORES.md §2: a reply of the wrong type for its
      # command is malformed).
      def checked(reply, shape)
        return reply if reply.is_a?(ErrorReply)

        fits = shape.is_a?(Proc) ? shape.call(reply) : shape.any? { |type| reply.is_a?(type) }
        raise Connection::Failure, "malformed answer: a #{reply.class} reply, which the command cannot get" unless fits

        reply
      end

      # Reads one reply, spending the limits as it goes.
      class Reader
        def initialize(connection, limits)
          @connection = connection
          @max_bulk = limits.max_bulk
          @elements = limits.max_elements
          @bytes = limits.max_bytes
        end

        def reply(depth)
          line = @connection.read_line
          spend(line.bytesize + 2)
          body = line.byteslice(1, line.bytesize - 1)
          case line.getbyte(0)
          when 43 then body == "OK" ? OK : Status.new(body) # "+"
          when 45 then ErrorReply.new(body.force_encoding(Encoding::UTF_8).scrub) # "-"
          when 58 then integer(body) # ":"
          when 36 then bulk(length(body)) # "$"
          when 42 then array(length(body), depth) # "*"
          else raise Connection::Failure, "malformed answer: #{line.byteslice(0, 40).inspect} is no RESP2 reply"
          end
        end

        private

        def integer(text)
          raise Connection::Failure, "malformed answer: integer #{text.byteslice(0, 40).inspect}" unless
            text.match?(INTEGER)

          text.to_i
        end

        def length(text)
          raise Connection::Failure, "malformed answer: length #{text.byteslice(0, 40).inspect}" unless
            text.match?(LENGTH)

          text.to_i
        end

        def bulk(size)
          return nil if size.negative?
          raise Connection::Failure, "a #{size}-byte value is longer than max_value (#{@max_bulk})" if size > @max_bulk

          spend(size + 2)
          @connection.read_bytes(size)
        end

        def spend(bytes)
          @bytes -= bytes
          raise Connection::Failure, "the reply holds more bytes than the command can produce" if @bytes.negative?
        end

        def array(count, depth)
          return nil if count.negative?
          raise Connection::Failure, "a reply nested more than #{MAX_DEPTH} deep" if depth >= MAX_DEPTH

          @elements -= count
          raise Connection::Failure, "the reply holds more elements than the command can produce" if @elements.negative?

          Array.new(count) { reply(depth + 1) }
        end
      end
    end
  end
end
