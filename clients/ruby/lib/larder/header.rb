# frozen_string_literal: true

module Larder
  # The entry header (spec/FORMAT.md §1): the fixed 23 bytes and the optional stale window, version and tags.
  #
  # Everything a store or a cache decides about an entry (expiry, version, tags) is read here, without touching the
  # payload, so a store can skip an expired entry without decompressing or deserializing anything.
  module Header
    MAGIC = "\xC1\x4C".b.freeze
    FORMAT_VERSION = 1
    FIXED_HEADER_LEN = 23
    # Offset of the compressor byte, rewritten once the encoder knows whether compression paid.
    COMPRESSOR_OFFSET = 5
    # Offset of `expires_at`, for readers that want only the expiry.
    EXPIRES_AT_OFFSET = 15

    FLAG_STALE = 0x01
    FLAG_VERSION = 0x02
    FLAG_TAGS = 0x04
    RESERVED_FLAGS = 0xFF & ~(FLAG_STALE | FLAG_VERSION | FLAG_TAGS)

    # Names of the header's numbered choices; a name's index is its wire id.
    KINDS = %w[value response].freeze
    SERIALIZERS = %w[raw msgpack json text].freeze
    COMPRESSORS = %w[none lz4 snappy zstd brotli gzip].freeze

    U16_MAX = 0xFFFF
    U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
    NO_TAGS = [].freeze
    # The first 7 bytes of an uncompressed msgpack value entry, by flags (value_head's template).
    VALUE_PREFIXES = Array.new(8) do |flags|
      [MAGIC, FORMAT_VERSION, KINDS.index("value"), SERIALIZERS.index("msgpack"), COMPRESSORS.index("none"),
       flags].pack("a2C5").freeze
    end.freeze
    PLAIN_PREFIX = VALUE_PREFIXES[0]

    # A parsed entry header. Times are ms since the Unix epoch; `expires_at == 0` means never. `payload_offset` is
    # the number of bytes the header takes: the payload starts there.
    # (Positional: a keyword_init Struct costs a Hash per entry read.)
    Fields = Struct.new(:kind, :serializer, :compressor, :created_at, :expires_at, :stale_ms, :version, :tags,
                        :payload_offset) do
      # The moment past which the entry may not be served at all, even stale; nil = never.
      def hard_expiry
        Header.hard_expiry(expires_at, stale_ms)
      end
    end

    module_function

    # `expires_at + stale_ms` (capped at 2^64-1), or nil when the entry never expires.
    def hard_expiry(expires_at, stale_ms)
      return nil if expires_at.zero?

      [expires_at + stale_ms, U64_MAX].min
    end

    # Only `expires_at`, the cheapest check a store can make; nil if `data` does not start like an entry.
    def peek_expires_at(data)
      return nil if data.bytesize < FIXED_HEADER_LEN || data.getbyte(0) != 0xC1 || data.getbyte(1) != 0x4C

      data.unpack1("@#{EXPIRES_AT_OFFSET}Q<")
    end

    # Parses the header of `data` (the whole entry, or at least its header) without looking at the payload.
    # Raises InvalidEntry (truncated, bad_magic, unsupported_version, unknown_codec, bad_header).
    #
    # Every read is by byte offset (getbyte, unpack1 with "@offset"), whatever the String's encoding, so the entry
    # is never copied: this runs on every read of every store.
    def read(data)
      length = data.bytesize
      magic = length >= 2 && data.getbyte(0) == 0xC1 && data.getbyte(1) == 0x4C
      if length < 3
        raise bad_magic(data.byteslice(0, 2)) if length >= 2 && !magic

        raise truncated("fixed header", FIXED_HEADER_LEN, length)
      end
      raise bad_magic(data.byteslice(0, 2)) unless magic

      version_byte = data.getbyte(2)
      if version_byte != FORMAT_VERSION
        raise InvalidEntry.new("unsupported_version",
                               "format version #{version_byte} (this reader knows version #{FORMAT_VERSION})")
      end
      raise truncated("fixed header", FIXED_HEADER_LEN, length) if length < FIXED_HEADER_LEN

      kind = name(KINDS, data.getbyte(3), "kind")
      serializer = name(SERIALIZERS, data.getbyte(4), "serializer")
      compressor = name(COMPRESSORS, data.getbyte(5), "compressor")
      flags = data.getbyte(6)
      if flags.anybits?(RESERVED_FLAGS)
        raise InvalidEntry.new("bad_header",
                               format("reserved flag bits set: %#04x", flags))
      end
      if kind == "response" && serializer != "msgpack"
        raise InvalidEntry.new("bad_header", "an HTTP response entry must use msgpack, not #{serializer}")
      end

      created_at = data.unpack1("@7Q<")
      expires_at = data.unpack1("@15Q<")
      return Fields.new(kind, serializer, compressor, created_at, expires_at, 0, nil, NO_TAGS, FIXED_HEADER_LEN) if
        flags.zero?

      stale_ms, version, tags, pos = read_optional(data, flags)
      Fields.new(kind, serializer, compressor, created_at, expires_at, stale_ms, version, tags.freeze, pos)
    end

    # The optional fields (stale window, version, tags) that `flags` announce, and the offset after them.
    def read_optional(view, flags)
      length = view.bytesize
      pos = FIXED_HEADER_LEN
      stale_ms = 0
      if flags.anybits?(FLAG_STALE)
        need(length, pos, 8, "stale window")
        stale_ms = view.unpack1("@#{pos}Q<")
        pos += 8
      end
      version = nil
      version, pos = read_string(view, pos, "version") if flags.anybits?(FLAG_VERSION)
      tags = []
      if flags.anybits?(FLAG_TAGS)
        need(length, pos, 2, "tag count")
        count = view.unpack1("@#{pos}S<")
        pos += 2
        count.times do
          tag, pos = read_string(view, pos, "tag")
          tags << tag
        end
      end
      [stale_ms, version, tags, pos]
    end

    # The header bytes for these fields (a mutable binary String). Raises ArgumentError for what the format
    # cannot hold.
    def pack(kind:, serializer:, compressor:, created_at:, expires_at:, stale_ms:, version:, tags:, capacity: 64)
      check_time(:created_at, created_at)
      check_time(:expires_at, expires_at)
      check_time(:stale_ms, stale_ms)
      raise TypeError, "tags must be an Array of strings, not a single string" if tags.is_a?(String)

      tags = Array(tags)
      flags = 0
      flags |= FLAG_STALE if stale_ms.positive?
      flags |= FLAG_VERSION unless version.nil?
      flags |= FLAG_TAGS unless tags.empty?
      # `capacity`: the whole entry's expected size, so that appending the payload does not grow the String again.
      out = String.new(capacity: capacity, encoding: Encoding::BINARY)
      [MAGIC, FORMAT_VERSION, id(KINDS, kind, "kind"), id(SERIALIZERS, serializer, "serializer"),
       id(COMPRESSORS, compressor, "compressor"), flags, created_at, expires_at].pack("a2C5Q<Q<", buffer: out)
      pack_optional(out, stale_ms, version, tags)
    end

    # `pack(kind: "value", serializer: "msgpack", compressor: "none", …)`, the same bytes, from a template of the
    # fixed part (VALUE_PREFIXES) and without keywords: the header of LarderStore's common write on memory://.
    # `tags`: an Array of Strings. Raises as `pack` does.
    #
    # The three times are range-checked at once: their bitwise or is in 0..2^64-1 exactly when each of them is
    # (with a `between?` each, a call took 7,300 instructions, counted by callgrind; so, 4,700).
    def value_head(created_at, expires_at, stale_ms, version, tags)
      unless created_at.is_a?(Integer) && expires_at.is_a?(Integer) && stale_ms.is_a?(Integer) &&
             ((created_at | expires_at | stale_ms) >> 64).zero?
        check_time(:created_at, created_at)
        check_time(:expires_at, expires_at)
        check_time(:stale_ms, stale_ms)
      end
      flags = 0
      flags |= FLAG_STALE if stale_ms.positive?
      flags |= FLAG_VERSION unless version.nil?
      flags |= FLAG_TAGS unless tags.empty?
      out = [VALUE_PREFIXES[flags], created_at, expires_at].pack("a7Q<Q<")
      return out if flags.zero?

      pack_optional(out, stale_ms, version, tags)
    end

    # `value_head(created_at, expires_at, 0, nil, [])` followed by `text`'s MessagePack head
    # (Serializers.append_string_head), packed at once: the commonest write on memory:// (no race window, version or
    # tags), one Array and one `pack` instead of two of each and a keyword (3,000 instructions a write; issue 34).
    # Nil for a String of 4 GiB or more (the caller's general path raises).
    def plain_string_head(created_at, expires_at, text)
      unless created_at.is_a?(Integer) && expires_at.is_a?(Integer) && ((created_at | expires_at) >> 64).zero?
        check_time(:created_at, created_at)
        check_time(:expires_at, expires_at)
      end
      size = text.bytesize
      if text.encoding == Encoding::BINARY
        return [PLAIN_PREFIX, created_at, expires_at, 0xC4, size].pack("a7Q<Q<CC") if size <= 0xFF
        return [PLAIN_PREFIX, created_at, expires_at, 0xC5, size].pack("a7Q<Q<Cn") if size <= 0xFFFF
        return [PLAIN_PREFIX, created_at, expires_at, 0xC6, size].pack("a7Q<Q<CN") if size <= 0xFFFF_FFFF
      else
        return [PLAIN_PREFIX, created_at, expires_at, 0xA0 | size].pack("a7Q<Q<C") if size <= 31
        return [PLAIN_PREFIX, created_at, expires_at, 0xD9, size].pack("a7Q<Q<CC") if size <= 0xFF
        return [PLAIN_PREFIX, created_at, expires_at, 0xDA, size].pack("a7Q<Q<Cn") if size <= 0xFFFF
        return [PLAIN_PREFIX, created_at, expires_at, 0xDB, size].pack("a7Q<Q<CN") if size <= 0xFFFF_FFFF
      end
      nil
    end

    # Appends the optional fields (stale window, version, tags) to `out`, a header's fixed part.
    def pack_optional(out, stale_ms, version, tags)
      [stale_ms].pack("Q<", buffer: out) if stale_ms.positive?
      out << pack_string("version", version) unless version.nil?
      unless tags.empty?
        raise ArgumentError, "#{tags.size} tags; the format allows at most #{U16_MAX}" if tags.size > U16_MAX

        [tags.size].pack("S<", buffer: out)
        tags.each { |tag| out << pack_string("tag", tag) }
      end
      out
    end

    def check_time(field, value)
      raise TypeError, "#{field} must be an Integer, not #{value.class}" unless value.is_a?(Integer)
      raise ArgumentError, "#{field} #{value} is outside 0..2^64-1" unless value.between?(0, U64_MAX)
    end

    def pack_string(field, text)
      raise TypeError, "#{field} must be a String, not #{text.class}" unless text.is_a?(String)

      raw = text.encode(Encoding::UTF_8).b
      if raw.bytesize > U16_MAX
        raise ArgumentError,
              "#{field} is #{raw.bytesize} bytes; the format allows at most #{U16_MAX}"
      end

      [raw.bytesize].pack("S<") + raw
    end

    def id(names, name, what)
      found = names.index(name) || names.index(name.to_s)
      return found if found

      raise ArgumentError, "unknown #{what} #{name.inspect} (expected one of: #{names.join(', ')})"
    end

    def name(names, wire_id, what)
      names[wire_id] || raise(InvalidEntry.new("unknown_codec", "unknown #{what} id #{wire_id}"))
    end

    def need(length, pos, count, what)
      raise truncated(what, pos + count, length) if pos + count > length
    end

    def read_string(view, pos, what)
      need(view.bytesize, pos, 2, what)
      size = view.unpack1("@#{pos}S<")
      pos += 2
      need(view.bytesize, pos, size, what)
      text = view.byteslice(pos, size).force_encoding(Encoding::UTF_8)
      raise InvalidEntry.new("bad_header", "#{what} is not valid UTF-8") unless text.valid_encoding?

      [text.freeze, pos + size]
    end

    def bad_magic(first_two)
      InvalidEntry.new("bad_magic", "starts with #{first_two.unpack1('H*')} instead of c14c: not a larder entry")
    end

    def truncated(what, need, have)
      InvalidEntry.new("truncated", "#{what} needs #{need} bytes, entry has #{have}")
    end
  end
end
