# frozen_string_literal: true

require "msgpack"
require_relative "errors"
require_relative "msgpack_reader"

module Larder
  # HTTP response entries (spec/FORMAT.md §4): what a proxy serves on a hit, as a MessagePack array.
  #
  # The payload is `[status, [[name, value], ...], body, content_encoding]`: header pairs keep their order and
  # duplicates (two Set-Cookie headers stay two), names, values and body are bytes, and the body may be stored already
  # compressed (`gzip`, `br`, `zstd`) so a server can send it as is to a client that accepts that coding.
  class HttpResponse
    # The codings a body may be stored in.
    CONTENT_ENCODINGS = %w[identity gzip br zstd].freeze

    attr_reader :status, :headers, :body, :content_encoding

    # `headers`: [name, value] pairs (Strings, stored as their bytes); `body`: a String (stored as its bytes).
    def initialize(status, headers = [], body = "", content_encoding = "identity")
      unless status.is_a?(Integer) && status.between?(100, 999)
        raise ArgumentError, "status must be an Integer in 100..999, not #{status.inspect}"
      end

      unless CONTENT_ENCODINGS.include?(content_encoding)
        raise ArgumentError, "content_encoding must be one of #{CONTENT_ENCODINGS.join(', ')}, not " \
                             "#{content_encoding.inspect}"
      end

      @status = status
      @headers = headers.map do |name, value|
        [bytes(name, "header name"), bytes(value, "header value")].freeze
      end.freeze
      @body = bytes(body, "body")
      @content_encoding = content_encoding.dup.freeze
      freeze
    end

    # The first value of header `name`, compared case-insensitively; nil if absent.
    def header(name)
      wanted = name.to_s.b.downcase
      @headers.each { |header_name, value| return value if header_name.downcase == wanted }
      nil
    end

    def ==(other)
      other.is_a?(HttpResponse) && status == other.status && headers == other.headers && body == other.body &&
        content_encoding == other.content_encoding
    end

    # The MessagePack payload of a kind-1 entry.
    def to_payload
      MessagePack.pack([@status, @headers.map(&:dup), @body, @content_encoding])
    end

    # Parses a decompressed kind-1 payload. Raises only InvalidEntry (kind bad_value).
    def self.from_payload(payload)
      reader = MsgpackReader.new(payload)
      elements = reader.array_len("response")
      raise bad("response array has #{elements} elements, needs at least 4") if elements < 4

      status = reader.uint("status")
      raise bad("status #{status} is outside 100-999") unless status.between?(100, 999)

      count = reader.array_len("headers")
      raise bad("headers: payload ends early") if count > payload.bytesize - reader.pos

      headers = Array.new(count) do
        raise bad("a header must be a [name, value] pair") if reader.array_len("header pair") != 2

        [reader.bytes_or_str("header name"), reader.bytes_or_str("header value")]
      end
      body = reader.bin("body")
      encoding = reader.str_bytes("content_encoding")
      raise bad("unknown content_encoding #{encoding.inspect}") unless CONTENT_ENCODINGS.include?(encoding)

      (elements - 4).times { reader.skip } # reserved elements: readers ignore them
      raise bad("#{payload.bytesize - reader.pos} bytes after the response") unless reader.at_end?

      new(status, headers, body, encoding.force_encoding(Encoding::UTF_8))
    end

    def self.bad(detail)
      InvalidEntry.new("bad_value", detail)
    end

    private

    def bytes(value, what)
      raise TypeError, "#{what} must be a String, not #{value.class}" unless value.is_a?(String)

      value.b.freeze
    end
  end
end
