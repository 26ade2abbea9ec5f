# frozen_string_literal: true

require "active_support"
require "active_support/cache"
require "larder"
require "larder/stores"
require "larder/ruby_values"

module ActiveSupport
  module Cache
    # A Rails cache store whose values are larder entries in any larder store, so that what Rails writes is read by
    # `larder inspect`, the Rust proxy and the other languages' clients, and the reverse.
    #
    #   config.cache_store = :larder_store, "memcached://cache1:11211,cache2:11211",
    #                        { namespace: "app", expires_in: 1.hour, race_condition_ttl: 10.seconds }
    #
    # Options (besides ActiveSupport's own: namespace, expires_in, race_condition_ttl, compress, compress_threshold):
    # - `compressor:` "lz4" (default), "zstd", "snappy", "brotli", "gzip" or "none"; `compress: false` means "none".
    #   `compress_threshold:` bytes (default 1024, as Rails).
    # - `serializer:` :larder (default: plain values as MessagePack, other Ruby objects as a MessagePack ext of
    #   type 101 holding Marshal, see Larder::RubyValues), :json or :text for values other languages write too.
    # - `coder:` an object with dump/load (ActiveSupport's API): the whole ActiveSupport entry is then dumped with it
    #   into a raw larder payload, which other languages read as opaque bytes.
    #
    # Values written with `raw: true` (counters) are stored bare, as ASCII decimal, as spec/STORES.md §3 says, so
    # `increment` and `decrement` use the store's counters.
    class LarderStore < Store
      prepend Strategy::LocalCache

      # How long past expiry an entry is kept when race_condition_ttl is set (as MemCacheStore does).
      RACE_WINDOW_MS = 300_000
      SERIALIZERS = { larder: "msgpack", msgpack: "msgpack", json: "json", text: "text" }.freeze

      def self.supports_cache_versioning?
        true
      end

      attr_reader :larder

      # `url`: a store URL (spec/STORES.md §1), default the process's memory; or a Larder store.
      def initialize(url = nil, options = nil)
        if url.is_a?(Hash)
          options = url
          url = nil
        end
        options = (options || {}).dup
        @custom_coder = options.key?(:coder) ? options.delete(:coder) : nil
        store = options.delete(:store) || url || "memory://"
        @larder = store.is_a?(String) ? Larder::Stores.open(store) : store
        serializer = options.delete(:serializer) || :larder
        @serializer = SERIALIZERS.fetch(serializer.to_sym) { raise ArgumentError, "unknown serializer #{serializer}" }
        compressor = options.delete(:compressor) || "lz4"
        @compressor = options[:compress] == false ? "none" : compressor.to_s
        @threshold = options[:compress_threshold] || Larder::DEFAULT_THRESHOLD
        super(options)
      end

      def increment(name, amount = 1, options = nil)
        options = merged_options(options)
        instrument(:increment, name, amount: amount) do
          failsafe(:increment) do
            @larder.incr(larder_key(normalize_key(name, options)), amount, ttl: options[:expires_in]&.to_f)
          end
        end
      end

      # Like Dalli's: a missing counter stays missing (nil).
      def decrement(name, amount = 1, options = nil)
        options = merged_options(options)
        instrument(:decrement, name, amount: amount) do
          failsafe(:decrement) do
            @larder.incr(larder_key(normalize_key(name, options)), -amount, ttl: options[:expires_in]&.to_f,
                                                                            create: false)
          end
        end
      end

      # true, or nil when the store failed (as ActiveSupport's stores answer).
      def clear(_options = nil)
        failsafe(:clear) do
          @larder.clear
          true
        end
      end

      def cleanup(_options = nil)
        true
      end

      # Removes every entry carrying `tag` in its larder header (written with `tags:`), in every language.
      def purge_tag(tag)
        @larder.purge_tag(tag)
      end

      # Key-pattern deletes are not offered (memcached cannot list keys); use purge_tag or Larder stores' purge_prefix.
      def delete_matched(matcher, options = nil)
        raise NotImplementedError, "#{self.class.name} does not support delete_matched; use purge_tag or purge_prefix"
      end

      private

      # A normalized ActiveSupport key (namespace:key) as a larder safe key (FORMAT.md §5.1).
      def larder_key(key)
        Larder::Keys.safe_key(key)
      end

      def read_entry(key, **_options)
        raw = failsafe(:read_entry) { @larder.get(larder_key(key)) }
        raw && to_as_entry(raw)
      end

      def read_multi_entries(names, **options)
        keys = names.map { |name| normalize_key(name, options) }
        raws = failsafe(:read_multi_entries, returning: []) { @larder.get_many(keys.map { |key| larder_key(key) }) }
        names.zip(raws || []).each_with_object({}) do |(name, raw), results|
          entry = raw && to_as_entry(raw)
          next if entry.nil? || entry.expired? || entry.mismatched?(normalize_version(name, options))

          results[name] = entry.value
        end
      end

      def write_entry(key, entry, unless_exist: false, raw: false, race_condition_ttl: nil, expires_in: nil, tags: [],
                      **_options)
        data, ttl = to_larder(entry, raw, race_condition_ttl && !unless_exist, expires_in, tags)
        failsafe(:write_entry, returning: false) do
          if unless_exist
            @larder.add(larder_key(key), data, ttl: ttl)
          else
            @larder.set(larder_key(key), data, ttl: ttl)
            true
          end
        end
      end

      def delete_entry(key, **_options)
        failsafe(:delete_entry, returning: false) { @larder.delete(larder_key(key)) }
      end

      # [bytes, store ttl]: a larder entry, or a bare counter for raw values.
      def to_larder(entry, raw, race, expires_in, tags)
        if raw
          value = entry.value
          return [value.to_s.b, expires_in&.to_f]
        end
        expires_at = entry.expires_at ? (entry.expires_at * 1000).round : 0
        stale = race && expires_at.positive? ? RACE_WINDOW_MS : 0
        options = { compressor: @compressor, threshold: @threshold, created_at: (Time.now.to_r * 1000).round,
                    expires_at: expires_at, stale_ms: stale,
                    version: entry.version&.to_s, tags: Array(tags).map(&:to_s) }
        data = if @custom_coder
                 Larder.encode(@custom_coder.dump(entry).b, serializer: "raw", **options)
               elsif @serializer == "msgpack"
                 encode_payload(Larder::RubyValues.dump(entry.value), options)
               else
                 Larder.encode(entry.value, serializer: @serializer, **options)
               end
        [data, nil]
      end

      # A larder entry around an already serialized msgpack payload.
      def encode_payload(payload, options)
        Larder.encode(payload, serializer: "raw", **options).tap { |data| data.setbyte(4, 1) }
      end

      # The ActiveSupport entry for stored bytes: a larder entry, or a bare value (a counter).
      def to_as_entry(raw)
        unless raw.start_with?(Larder::Header::MAGIC)
          return Entry.new(raw.dup.force_encoding(Encoding::UTF_8),
                           compress: false)
        end

        header, payload = Larder.decode_payload(raw)
        return @custom_coder.load(payload) if @custom_coder && header.serializer == "raw"

        value = if header.serializer == "msgpack"
                  Larder::RubyValues.load(payload)
                else
                  Larder::Serializers.deserialize(
                    header.serializer, payload
                  )
                end
        as_entry(value, header)
      rescue Larder::InvalidEntry => e
        logger&.error("LarderStore: unreadable entry: #{e.message}")
        nil
      end

      # An ActiveSupport entry with the larder header's times (ActiveSupport 6.1 keeps created_at and expires_in).
      def as_entry(value, header)
        entry = Entry.new(value, compress: false, version: header.version)
        created = header.created_at / 1000.0
        entry.instance_variable_set(:@created_at, created) if entry.instance_variable_defined?(:@created_at)
        entry.expires_at = header.expires_at / 1000.0 unless header.expires_at.zero?
        entry
      end

      def failsafe(method, returning: nil)
        yield
      rescue Larder::StoreError => e
        if ActiveSupport.respond_to?(:error_reporter)
          ActiveSupport.error_reporter&.report(e, handled: true, severity: :warning)
        end
        logger&.error("LarderStore: #{method} failed, returned #{returning.inspect}: #{e.message}")
        returning
      end
    end
  end
end
