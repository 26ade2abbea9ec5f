# frozen_string_literal: true

require_relative "errors"
require_relative "header"
require_relative "compressors"
require_relative "serializers"
require_relative "response"

# Whole entries (see below).
module Larder
  # Payloads shorter than this many bytes are stored uncompressed unless told otherwise.
  DEFAULT_THRESHOLD = 1024

  # A decoded entry. Times are ms since the Unix epoch; `expires_at == 0` means never. `value` is the deserialized
  # value for kind "value", an HttpResponse for kind "response".
  Entry = Struct.new(:kind, :serializer, :compressor, :created_at, :expires_at, :stale_ms, :version, :tags, :value,
                     keyword_init: true) do
    # The moment past which the entry may not be served at all, even stale; nil = never.
    def hard_expiry
      Header.hard_expiry(expires_at, stale_ms)
    end

    # Whether the entry is past `expires_at` at `now` (but maybe still within its stale window).
    def expired?(now = Larder.now_ms)
      !expires_at.zero? && now >= expires_at
    end
  end

  # Whole entries: header + payload, encoded and decoded.
  #
  # Encoding serializes the value, then applies the compression rule of spec/FORMAT.md §3: compress only a payload
  # of at least `threshold` bytes, and keep the compressed form only if it is strictly shorter; the compressor byte
  # records what was done. Decoding parses the header, decompresses within `max_size`, and deserializes; any invalid
  # input surfaces as InvalidEntry.
  class << self
    # Milliseconds since the Unix epoch, from the system clock.
    def now_ms
      Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
    end

    # Encodes `value` as a value entry (kind 0).
    #
    # `serializer`: "msgpack" (default), "json", "text" (a String) or "raw" (a String's bytes). `compressor`: "lz4"
    # (default), "snappy", "zstd", "brotli", "gzip" or "none"; applied only to payloads of at least `threshold`
    # bytes and kept only when it shrinks them. Times are ms: `created_at` defaults to now; give `ttl_ms` (0 = never
    # expires) or an absolute `expires_at` (0 = never), not both.
    def encode(value, serializer: "msgpack", **options)
      payload = Serializers.serialize(serializer, value)
      build("value", serializer, payload, **options)
    end

    # Encodes a value entry around a payload already serialized with `serializer` (a binary String, or an Array of
    # binary Strings that make it up in order). Options as for `encode`.
    def encode_serialized(payload, serializer:, compressor: "lz4", threshold: DEFAULT_THRESHOLD, level: nil,
                          created_at: nil, ttl_ms: nil, expires_at: nil, stale_ms: 0, version: nil, tags: [])
      raise ArgumentError, "unknown serializer #{serializer.inspect}" unless Header::SERIALIZERS.include?(serializer)

      build("value", serializer, payload, compressor: compressor, threshold: threshold, level: level,
                                          created_at: created_at, ttl_ms: ttl_ms, expires_at: expires_at,
                                          stale_ms: stale_ms, version: version, tags: tags)
    end

    # Encodes an HttpResponse as a kind-1 entry (always serializer msgpack). Options as for `encode`.
    def encode_response(response, **options)
      unless response.is_a?(HttpResponse)
        raise TypeError,
              "encode_response takes an HttpResponse, not #{response.class}"
      end

      build("response", "msgpack", response.to_payload, **options)
    end

    # Decodes a whole entry. `max_size` bounds the decompressed payload (default 64 MiB). Raises InvalidEntry.
    def decode(data, max_size: Compressors::DEFAULT_MAX_SIZE)
      header, payload = decode_payload(data, max_size: max_size)
      value = if header.kind == "response"
                HttpResponse.from_payload(payload)
              else
                Serializers.deserialize(header.serializer, payload)
              end
      Entry.new(kind: header.kind, serializer: header.serializer, compressor: header.compressor,
                created_at: header.created_at, expires_at: header.expires_at, stale_ms: header.stale_ms,
                version: header.version, tags: header.tags, value: value)
    end

    # The header and the decompressed (still serialized) payload of an entry. Raises InvalidEntry.
    def decode_payload(data, max_size: Compressors::DEFAULT_MAX_SIZE)
      raise TypeError, "an entry is a String, not #{data.class}" unless data.is_a?(String)

      header = Header.read(data)
      offset = header.payload_offset
      payload = Compressors.decompress(header.compressor, data.byteslice(offset, data.bytesize - offset), max_size)
      [header, payload]
    end

    private

    def expiry_from_ttl(created_at, ttl_ms)
      raise ArgumentError, "ttl_ms must be a non-negative Integer" unless ttl_ms.is_a?(Integer) && ttl_ms >= 0

      ttl_ms.zero? ? 0 : [created_at + ttl_ms, Header::U64_MAX].min
    end

    # `payload`: the serialized payload, as one binary String or as an Array of binary Strings to be written one
    # after the other (so a large value is copied once, into the entry, and not first into a payload).
    def build(kind, serializer, payload, compressor: "lz4", threshold: DEFAULT_THRESHOLD, level: nil, created_at: nil,
              ttl_ms: nil, expires_at: nil, stale_ms: 0, version: nil, tags: [])
      raise ArgumentError, "unknown compressor #{compressor.inspect}" unless Header::COMPRESSORS.include?(compressor)
      raise ArgumentError, "threshold must be a non-negative Integer" unless threshold.is_a?(Integer) && threshold >= 0
      raise ArgumentError, "give ttl_ms or expires_at, not both" if ttl_ms && expires_at

      created_at ||= now_ms
      expires_at = expiry_from_ttl(created_at, ttl_ms) if ttl_ms
      parts = payload.is_a?(Array) ? payload : [payload]
      size = parts.sum(&:bytesize)
      if compressor != "none" && size >= threshold
        whole = parts.size == 1 ? parts.first : parts.each_with_object(String.new(capacity: size)) { |p, o| o << p }
        compressed = Compressors.compress(compressor, whole, level)
        if compressed.bytesize < size
          header = Header.pack(kind: kind, serializer: serializer, compressor: compressor, created_at: created_at,
                               expires_at: expires_at || 0, stale_ms: stale_ms, version: version, tags: tags,
                               capacity: 64 + compressed.bytesize)
          return header << compressed
        end
      end
      header = Header.pack(kind: kind, serializer: serializer, compressor: "none", created_at: created_at,
                           expires_at: expires_at || 0, stale_ms: stale_ms, version: version, tags: tags,
                           capacity: 64 + size)
      parts.each { |part| header << part }
      header
    end
  end
end
