# frozen_string_literal: true

require "securerandom"
require_relative "../larder"
require_relative "store_url"

module Larder
  # Stores: where entries live (spec/STORES.md). Every backend offers the same verbs, on bytes:
  #
  #   get(key) / get_many(keys)           the stored bytes, or nil
  #   set(key, value, ttl: nil)           ttl in seconds (Numeric) on top of the entry's own expiry
  #   set_many({key => value}, ttl: nil)
  #   add(key, value, ttl: nil)           true if it stored (the building block for locks)
  #   incr(key, delta, ttl: nil, create: true)   the new value, or nil when missing and not created
  #   delete(key) / delete_many(keys) / delete_if(key, expected)
  #   clear / purge_prefix(prefix) / purge_tag(tag)
  #
  # Keys are a caller's safe keys (FORMAT.md §5.1), checked on every operation before anything is sent: any other
  # key, and an unsafe purge prefix, is an InvalidKey error (spec/STORES.md §2). A store with a `prefix` writes
  # `safe_key(prefix + key)`.
  # `Stores.open(url)` opens any store from its URL (§1).
  module Stores
    autoload :Memory, "larder/stores/memory"
    autoload :Memcached, "larder/stores/memcached"
    autoload :Redis, "larder/stores/redis"
    autoload :Sql, "larder/stores/sql"
    autoload :File, "larder/stores/file"

    SCHEMES = %w[memory memcached redis redis+cluster sqlite postgres file].freeze

    # Opens the store a URL names.
    def self.open(url)
      parsed = url.is_a?(StoreUrl) ? url : StoreUrl.parse(url)
      store = case parsed.scheme
              when "memory" then Memory.from_url(parsed)
              when "memcached" then Memcached.from_url(parsed)
              when "redis", "redis+cluster" then Redis.from_url(parsed)
              when "sqlite", "postgres" then Sql.from_url(parsed)
              when "file" then File.from_url(parsed)
              else raise UrlError, "unknown store scheme #{parsed.scheme.inspect} (known: #{SCHEMES.join(', ')})"
              end
      parsed.finish!
      store
    end

    # A store key, purge prefix or tag as the UTF-8 text whose bytes a store checks and then sends, unchanged, to the
    # wire (spec/STORES.md §2, "Wire bytes are the checked bytes"): a UTF-8 string as it is, a binary or US-ASCII one
    # read as the UTF-8 its bytes are, a string in any other encoding transcoded to UTF-8 once (a Latin-1 "é" is the
    # key "é", C3 A9; a UTF-16 "\u010A" is C4 8A, never the byte 0x0A its low half would be); nil when the string is
    # not valid in its encoding (a lone surrogate, bytes that are not UTF-8), which a store refuses, never repairs.
    def self.wire_text(key)
      case key.encoding
      when Encoding::UTF_8
        key.valid_encoding? ? key : nil
      when Encoding::BINARY, Encoding::US_ASCII
        text = key.dup.force_encoding(Encoding::UTF_8)
        text.valid_encoding? ? text : nil
      else
        key.valid_encoding? ? key.encode(Encoding::UTF_8) : nil
      end
    rescue EncodingError
      nil
    end

    # The keys a store writes (spec/STORES.md §2): a caller's keys under the `prefix` option, and internal keys.
    class Keys
      attr_reader :prefix

      def initialize(prefix = "")
        @prefix = prefix.to_s
      end

      def stored(key)
        @prefix.empty? ? key : Larder::Keys.safe_key(@prefix + key)
      end

      def internal(purpose, name)
        stored(Larder::Keys.safe_key("larder\u0000#{purpose}:#{name}"))
      end
    end

    # What every store shares: expiry from entries and TTLs, lock tokens, the default batch operations.
    class Base
      attr_reader :keys

      def initialize(prefix: "")
        @keys = Keys.new(prefix)
      end

      def backend
        self.class::BACKEND
      end

      # The batch operations check every key before the first is sent.
      def get_many(keys)
        keys.each { |key| check_key(key) }
        keys.map { |key| get(key) }
      end

      def set_many(items, ttl: nil)
        items.each_key { |key| check_key(key) }
        items.each { |key, value| set(key, value, ttl: ttl) }
        nil
      end

      def delete_many(keys)
        keys.each { |key| check_key(key) }
        keys.count { |key| delete(key) }
      end

      def close; end

      # The moment (ms) past which `value` may not be returned (spec/STORES.md §2), or nil for never: the earlier of
      # now + ttl and the entry's hard expiry.
      # `header`: the value's entry header when the caller has read it already (entry_header), to read it once.
      def self.expiry_ms(value, ttl, now = nil, header: :unread)
        hard = header == :unread ? entry_hard_expiry(value) : header&.hard_expiry
        return hard if ttl.nil?

        by_ttl = (now || Larder.now_ms) + (ttl * 1000).ceil
        hard.nil? || by_ttl < hard ? by_ttl : hard
      end

      # The hard expiry of an entry (expires_at + stale_ms), or nil when it never expires or is not an entry.
      def self.entry_hard_expiry(value)
        return nil unless entry?(value)

        Header.read(value).hard_expiry
      rescue InvalidEntry
        nil
      end

      # The header of an entry, or nil for a value that is not one (or whose header does not parse).
      def self.entry_header(value)
        return nil unless entry?(value)

        Header.read(value)
      rescue InvalidEntry
        nil
      end

      # The tags in an entry's header, or none for a value that is not an entry.
      def self.entry_tags(value)
        return [] unless entry?(value)

        Header.read(value).tags
      rescue InvalidEntry
        []
      end

      # Whether `value` starts like an entry (its first two bytes, whatever the String's encoding).
      def self.entry?(value)
        value.getbyte(0) == 0xC1 && value.getbyte(1) == 0x4C
      end

      # A lock token (spec/STORES.md §3): 16 lowercase hex digits from a random 64-bit number.
      def self.token
        SecureRandom.hex(8)
      end

      # A counter's value, or raises NotACounter.
      def self.counter_value(backend, key, raw)
        text = raw.to_s
        raise NotACounter.new(backend, "the value at #{key} is not a counter") unless text.match?(/\A-?\d+\z/)

        text.to_i
      end

      I64_MIN = -(2**63)
      I64_MAX = (2**63) - 1

      def self.saturate(value)
        value.clamp(I64_MIN, I64_MAX)
      end

      private

      # `key` as the UTF-8 text a store checks and sends (spec/STORES.md §2, "Wire bytes are the checked bytes"), or
      # raises InvalidKey unless it is a safe, non-empty key. Every store uses what this returns, never `key` itself.
      def check_key(key)
        raise ArgumentError, "a store key is a String, not #{key.class}" unless key.is_a?(String)

        text = Stores.wire_text(key)
        problem = text ? Larder::Keys.key_problem(text) : "not valid in its encoding (#{key.encoding})"
        raise InvalidKey.new(backend, key, problem) if problem

        text
      end

      # `prefix` as UTF-8 text, or raises InvalidKey unless it is a prefix a store may purge (the empty prefix is one).
      def check_prefix(prefix)
        raise ArgumentError, "a purge prefix is a String, not #{prefix.class}" unless prefix.is_a?(String)

        text = Stores.wire_text(prefix)
        problem = text ? Larder::Keys.prefix_problem(text) : "not valid in its encoding (#{prefix.encoding})"
        raise InvalidKey.new(backend, prefix, problem) if problem

        text
      end

      # `tag` as the UTF-8 text a store compares and sends (spec/STORES.md §2: a tag is free UTF-8, encoded once, as
      # keys are), or raises InvalidKey when it is not valid in its encoding.
      def check_tag(tag)
        raise ArgumentError, "a tag is a String, not #{tag.class}" unless tag.is_a?(String)

        text = Stores.wire_text(tag)
        raise InvalidKey.new(backend, tag, "not valid in its encoding (#{tag.encoding})") unless text

        text
      end

      # The key the server sees for a caller's key, checked here (check_key).
      def stored_key(key)
        stored_of(check_key(key))
      end

      # The key the server sees for a key check_key returned.
      def stored_of(text)
        @keys.stored(text)
      end
    end
  end
end
