# frozen_string_literal: true

require "active_support"
require "active_support/cache"
begin
  # Marshal.load that autoloads the classes a dump names and retries (ActiveSupport's own Marshal-based stores
  # require it too); without it only the first missing class of a value is autoloaded (Ruby's const_missing hook).
  require "active_support/core_ext/marshal"
rescue LoadError
  nil # gone in a later ActiveSupport: Zeitwerk's autoloads answer Marshal's constant lookups
end
require "larder"
require "larder/stores"
require "larder/ruby_values"
require "larder/signed_ext"
require "larder/lock_policy"
require "larder/outage_memory"
require_relative "larder_store_fetch"
require_relative "larder_store_memory"

module ActiveSupport
  module Cache
    # A Rails cache store whose values are larder entries in any larder store, so that what Rails writes is read by
    # `larder inspect`, the Rust proxy and the other languages' clients, and the reverse.
    #
    #   config.cache_store = :larder_store, "memcached://cache1:11211,cache2:11211",
    #                        { namespace: "app", expires_in: 1.hour, race_condition_ttl: 10.seconds }
    #
    # Options (besides ActiveSupport's own: namespace, expires_in, race_condition_ttl, compress, compress_threshold),
    # accepted in the shapes ActiveSupport 7.1+ documents for them:
    # - `compressor:` a larder compressor, "lz4" (default), "zstd", "snappy", "brotli", "gzip" or "none";
    #   `compress: false` means "none"; on memory://, as MemoryStore, compression is off unless asked for.
    #   ActiveSupport 7.1's `compressor: Zlib` (its default) means "gzip": the entry records its compressor so every
    #   language can decode it, so other compressor objects are refused.
    #   `compress_threshold:` bytes (default 1024, as Rails).
    # - `serializer:` :larder (default): plain values as MessagePack, other Ruby objects as a MessagePack ext of
    #   type 101 holding their Marshal dump, signed (Larder::RubyValues, spec/FORMAT.md §2); :message_pack and
    #   :msgpack: MessagePack only, never Marshal, neither to write (a value that is not plain raises
    #   Larder::MarshalDisabled) nor to read (an ext 101 value is a miss); 7.1's :marshal_6_1, :marshal_7_0,
    #   :marshal_7_1 and Marshal itself: every value as a signed Marshal ext; :json or :text for values other
    #   languages write too; or, as in 7.1, any other object with `dump(value)`/`load(bytes)`, whose output is a
    #   `raw` payload (opaque bytes to other languages; its `load` gets whatever any writer put there).
    # - `signing_secret:` the secret that signs and verifies Marshal values (default: Rails' secret_key_base when
    #   Rails is loaded); `signing_secret_fallbacks:` older secrets still accepted on read. Without a secret Marshal
    #   is off: writing a value that needs it raises Larder::MarshalDisabled, reading one is a miss. A value that is
    #   unsigned, signed under another secret or tampered with is a miss too (logged once per process and reason),
    #   and never reaches Marshal.load.
    # - `coder:` an object with dump/load (ActiveSupport's API): the whole ActiveSupport entry is then dumped with it
    #   into a raw larder payload, which other languages read as opaque bytes, and which its `load` gets from any
    #   writer of the store (so Marshal is refused as a coder: use serializer: :marshal_7_1, which signs). As in 7.1,
    #   it excludes `serializer:` and `compressor:`; `coder: nil` is the default.
    #
    # - `lock_ttl:` seconds (default 10): `fetch` with a block follows larder's one lock policy (LarderStoreFetch):
    #   across the processes sharing the store, one runs the block for a missing or expired key; this bounds how
    #   long its lock may keep the others waiting.
    # - `outage_memory:` the size of the outage memory (spec/STORES.md §3, "When the store fails";
    #   Larder::OutageMemory): bytes or a size as the store URLs write it (default "16M"; 0 = off; none on memory://).
    #   What the store fails to write is kept there with the expiry the store would have given it, a read the store
    #   fails is answered from it, deletes, purges and clear apply to it, and the store's first good answer once no
    #   failure has been seen for a second empties it.
    #
    # Values written with `raw: true` (counters) are stored bare, as ASCII decimal, as spec/STORES.md §3 says, so
    # `increment` and `decrement` use the store's counters.
    class LarderStore < Store
      prepend Strategy::LocalCache
      include LarderStoreFetch

      # How long past expiry an entry is kept when race_condition_ttl is set (as MemCacheStore does).
      RACE_WINDOW_MS = 300_000
      # Values whose decoded entry the memory store may keep (read_view).
      SHAREABLE = [NilClass, TrueClass, FalseClass, Integer, Float, String].freeze
      # ActiveSupport 6.1's LocalCache wraps read_entry (so read_view runs beneath it); 7.1's wraps
      # read_serialized_entry, which read_view skips, so there it runs only when no local cache is active.
      LOCAL_CACHE_WRAPS_READ_ENTRY = !Strategy::LocalCache.private_method_defined?(:read_serialized_entry) &&
                                     !Strategy::LocalCache.method_defined?(:read_serialized_entry)
      NO_TAGS = [].freeze
      # serializer: => [larder serializer, when Marshal is used (Larder::RubyValues)].
      SERIALIZERS = { larder: ["msgpack", :when_needed], msgpack: ["msgpack", :never],
                      message_pack: ["msgpack", :never], marshal: ["msgpack", :always],
                      marshal_6_1: ["msgpack", :always], marshal_7_0: ["msgpack", :always],
                      marshal_7_1: ["msgpack", :always], json: ["json", :never], text: ["text", :never] }.freeze

      def self.supports_cache_versioning?
        true
      end

      attr_reader :larder

      # The outage memory (Larder::OutageMemory), or nil when it is off.
      def outage_memory
        @outage
      end

      # `url`: a store URL (spec/STORES.md §1), default the process's memory; or a Larder store.
      def initialize(url = nil, options = nil)
        if url.is_a?(Hash)
          options = url
          url = nil
        end
        options = (options || {}).dup
        if options[:coder] && (options[:serializer] || options[:compressor])
          raise ArgumentError, "give coder: or serializer:/compressor:, not both (as ActiveSupport 7.1)"
        end

        if options[:coder].equal?(Marshal)
          raise ArgumentError, "coder: Marshal would Marshal.load what any writer of the store put there; use " \
                               "serializer: :marshal_7_1, whose Marshal values are signed"
        end

        @custom_coder = options.delete(:coder)
        @signing = [options.delete(:signing_secret), Array(options.delete(:signing_secret_fallbacks))]
        store = options.delete(:store) || url || "memory://"
        @larder = store.is_a?(String) ? Larder::Stores.open(store) : store
        @views = @larder.is_a?(Larder::Stores::Memory)
        when_the_store_fails(options)
        # As ActiveSupport's MemoryStore: the process's own memory is not compressed unless asked (`compress: true`
        # or a `compressor:`), since no network is saved, only CPU spent on every write and read.
        if @larder.is_a?(Larder::Stores::Memory) && !options.key?(:compress) && !options.key?(:compressor)
          options[:compress] = false
        end
        choose_serializer(options.delete(:serializer) || :larder)
        compressor = larder_compressor(options.delete(:compressor))
        @compressor = compressor # used unless the call's (or the store's) compress: is false
        super(options)
        @options[:larder_compress] = @options.fetch(:compress, true) # see merged_options
        @options[:compress] = false
        return unless @views

        # A String value is held as its entry's head and itself (write_parts) where the entry is plain MessagePack.
        @parts = @serializer == "msgpack" && !@custom_coder && !@value_serializer && @marshal != :always
        extend LarderStoreMemory
      end

      # ActiveSupport 6.1 passes options as a Hash, 7.1+ as keywords.
      def increment(name, amount = 1, options = nil, **more)
        options = merged_options((options || {}).merge(more))
        instrument(:increment, name, amount: amount) do
          failsafe(:increment) do
            @larder.incr(larder_key(normalize_key(name, options)), amount, ttl: options[:expires_in]&.to_f)
          end
        end
      end

      # Like Dalli's: a missing counter stays missing (nil).
      def decrement(name, amount = 1, options = nil, **more)
        options = merged_options((options || {}).merge(more))
        instrument(:decrement, name, amount: amount) do
          failsafe(:decrement) do
            @larder.incr(larder_key(normalize_key(name, options)), -amount, ttl: options[:expires_in]&.to_f,
                                                                            create: false)
          end
        end
      end

      # true, or nil when the store failed (as ActiveSupport's stores answer).
      def clear(_options = nil)
        @outage&.clear
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
        @outage&.purge_tag(tag)
        @larder.purge_tag(tag)
      end

      # The SignedExt that signs and verifies Marshal values, or nil when Marshal is off (no secret): the
      # `signing_secret:` option, else Rails' secret_key_base, looked up on first use (Rails sets it up after the
      # cache store is configured).
      def signer
        return @signer if defined?(@signer)

        secret, fallbacks = @signing
        secret ||= rails_secret
        @signer = secret && Larder::SignedExt.new(secret, fallbacks: fallbacks)
      end

      # Key-pattern deletes are not offered (memcached cannot list keys); use purge_tag or Larder stores' purge_prefix.
      def delete_matched(matcher, options = nil)
        raise NotImplementedError, "#{self.class.name} does not support delete_matched; use purge_tag or purge_prefix"
      end

      private

      # ActiveSupport 6.1's Entry.new compresses a value with Zlib itself when the options say `compress:` (its
      # default), and LarderStore would then inflate it again to build the larder entry, which is compressed by the
      # entry's own rule (FORMAT.md §3): a deflate and an inflate for nothing on every write (80% of a 64 KiB write).
      # So the store's options say `compress: false` to the Entry and carry the store's choice as `larder_compress:`
      # (set once, in initialize), and a call's own `compress:` is moved there too; serialize_entry reads it.
      def merged_options(call_options)
        options = super
        return options unless call_options&.key?(:compress) && !call_options.key?(:larder_compress)

        options.merge(compress: false, larder_compress: call_options[:compress])
      end

      # The lock policy (`lock_ttl:`) and the outage memory (`outage_memory:`), taken from `options`.
      def when_the_store_fails(options)
        @lock_policy = Larder::LockPolicy.new(@larder, lock_ttl: (options.delete(:lock_ttl) || 10).to_f)
        size = options.delete(:outage_memory) { Larder::OutageMemory::DEFAULT }
        @outage = @views ? nil : Larder::OutageMemory.for(size)
      end

      # A normalized ActiveSupport key (namespace:key) as a larder safe key (FORMAT.md §5.1).
      def larder_key(key)
        Larder::Keys.safe_key(key)
      end

      # Reads go through read_serialized_entry and writes through write_serialized_entry, the hooks ActiveSupport
      # 7.1+'s LocalCache wraps (it keeps the stored bytes); 6.1's LocalCache wraps read_entry/write_entry.
      def read_entry(key, **options)
        if LOCAL_CACHE_WRAPS_READ_ENTRY # 6.1: nothing wraps the two hooks, so no options are passed through them
          return read_view(key) if @views

          raw = read_raw(larder_key(key))
          return raw && to_as_entry(raw)
        end
        return read_view(key) if @views && local_cache.nil?

        deserialize_entry(read_serialized_entry(key, **options), **options)
      end

      # On the process's memory: the entry decoded once per stored bytes (Larder::Stores::Memory#get_view), and a
      # copy handed out, as ActiveSupport's MemoryStore hands out copies of the entries it keeps.
      #
      # An entry that is not kept (a value other than a String, a number, a boolean or nil: a query result, a
      # document) is decoded from the stored bytes on every read, so it is already the caller's own copy: copying it
      # again (dup_value!, a Marshal dump and load in ActiveSupport 6.1) would cost four times the decoding (issue 34).
      def read_view(key)
        fresh = false
        entry = @larder.view_named(key, self) do |raw|
          made = entry_view(raw)
          fresh = !made[1]
          made
        end
        return entry if entry.nil? || fresh

        copy = entry.dup
        copy.dup_value!
        copy
      end

      # [the entry, whether to keep it]: kept when a copy costs no more than dup_value! (nil, booleans, numbers, a
      # String) and the value shares the stored bytes instead of adding a decompressed copy of them to memory.
      def entry_view(raw)
        entry = to_as_entry(raw)
        return [nil, false] if entry.nil?

        uncompressed = !Larder::Stores::Base.entry?(raw) || raw.getbyte(Larder::Header::COMPRESSOR_OFFSET).zero?
        [entry, uncompressed && SHAREABLE.any? { |type| type === entry.value }] # rubocop:disable Style/CaseEquality
      end

      def read_serialized_entry(key, **)
        read_raw(larder_key(key))
      end

      # The bytes at `stored`, or nil; when the store fails, what the outage memory holds there.
      def read_raw(stored)
        raw = @larder.get(stored)
        @outage.answered if @outage&.failing?
        raw
      rescue Larder::StoreError => e
        failed(:read_entry, nil, e)
        outage_failed(e)&.get(stored)
      end

      # The outage memory, now marked failing, when `error` is a failure of the store; else nil.
      def outage_failed(error)
        return nil unless @outage && Larder::OutageMemory.failure?(error)

        @outage.failed!
        @outage
      end

      def deserialize_entry(payload, **)
        payload && to_as_entry(payload)
      end

      def read_multi_entries(names, **options)
        return read_multi_views(names, options) if @views && (LOCAL_CACHE_WRAPS_READ_ENTRY || local_cache.nil?)

        stored = names.map { |name| larder_key(normalize_key(name, options)) }
        raws = begin
          @larder.get_many(stored).tap { @outage.answered if @outage&.failing? }
        rescue Larder::StoreError => e
          failed(:read_multi_entries, [], e)
          outage_failed(e)&.get_many(stored) || []
        end
        names.zip(raws).each_with_object({}) do |(name, raw), results|
          entry = raw && to_as_entry(raw)
          next if entry.nil? || entry.expired? || entry.mismatched?(normalize_version(name, options))

          results[name] = entry.value
        end
      end

      def read_multi_views(names, options)
        names.each_with_object({}) do |name, results|
          entry = read_view(normalize_key(name, options))
          next if entry.nil? || entry.expired? || entry.mismatched?(normalize_version(name, options))

          results[name] = entry.value
        end
      end

      def write_entry(key, entry, **options)
        store_entry(key, entry, options)
      end

      def store_entry(key, entry, options)
        if @parts && parts?(entry.value, options) && (LOCAL_CACHE_WRAPS_READ_ENTRY || local_cache.nil?)
          return write_parts(key, entry, options)
        end

        write_serialized_entry(key, serialize_entry(entry, **options), **options)
      end

      # Whether write_parts takes this value: a UTF-8 or binary String (what MessagePack writes as its bytes after
      # a head) that will not be compressed (compression off, or the payload below the threshold).
      def parts?(value, options)
        return false unless value.instance_of?(String) && !options[:raw]

        encoding = value.encoding
        return false unless encoding == Encoding::UTF_8 ? value.valid_encoding? : encoding == Encoding::BINARY

        compress = options.fetch(:larder_compress) { options.fetch(:compress, true) }
        return true if compress == false || @compressor == "none"

        threshold = options[:compress_threshold] || Larder::DEFAULT_THRESHOLD
        threshold.is_a?(Integer) && value.bytesize + 5 < threshold # 5: the largest MessagePack head below 4 GiB
      end

      # The memory store's write of a String (Memory#put_parts): the entry's head (the header from its template,
      # Header.value_head, and the MessagePack head) and the value itself, frozen, not copied into an entry; the
      # ActiveSupport Entry, with the header's times, kept as the view reads copy. The bytes the store gives out
      # for it are those serialize_entry would have written at the same moment (test/memory_parts_test.rb).
      def write_parts(key, entry, options)
        entry = entry.dup if @local_cache_used # LocalCache keeps the entry it was given
        expires_at = entry.expires_at ? (entry.expires_at * 1000).round : 0
        unless_exist = options[:unless_exist] ? true : false
        stale = options[:race_condition_ttl] && !unless_exist && expires_at.positive? ? RACE_WINDOW_MS : 0
        tags = options[:tags]
        tags = tags.nil? ? NO_TAGS : Array(tags).map(&:to_s)
        version = entry.version&.to_s
        created_at = created_ms(entry)
        entry.dup_value! # as MemoryStore: the caller's String is not kept (a dup shares its bytes until either changes)
        body = entry.value.freeze
        plain = stale.zero? && version.nil? && tags.empty?
        head = plain ? Larder::Header.plain_string_head(created_at, expires_at, body) : nil
        unless head
          head = Larder::Header.value_head(created_at, expires_at, stale, version, tags)
          Larder::Serializers.append_string_head(body, head)
        end
        # An entry that never expires has nothing a read of its times would see (6.1's Entry shows only expires_at,
        # from @created_at + @expires_in), so only one that expires is given the header's (2,500 instructions).
        entry_times(entry, created_at, expires_at) unless expires_at.zero?
        # failsafe's rescue, without its block and keyword (2,000 instructions a call, counted by callgrind)
        begin
          @larder.put_named(key, head, body, Larder::Header.hard_expiry(expires_at, stale), [self, entry].freeze,
                            unless_exist)
        rescue Larder::StoreError => e
          failed(:write_entry, false, e)
        end
      end

      # The stored bytes: a larder entry, or a bare counter for raw values.
      # `compress:` and `compress_threshold:` arrive merged (the call's over the store's), as Rails documents them:
      # a payload of at least the threshold (default 1 KiB) is compressed, and kept so only when that made it
      # smaller (spec/FORMAT.md §3); `compress: false` stores it as it is.
      def serialize_entry(entry, raw: false, race_condition_ttl: nil, unless_exist: false, tags: nil, compress: true,
                          larder_compress: compress, compress_threshold: nil, **)
        return entry.value.to_s.b if raw

        compressor = larder_compress == false ? "none" : @compressor
        threshold = compress_threshold.nil? ? Larder::DEFAULT_THRESHOLD : Integer(compress_threshold)
        to_larder(entry, race_condition_ttl && !unless_exist, tags.nil? ? NO_TAGS : Array(tags).map(&:to_s),
                  compressor, threshold)
      end

      def write_serialized_entry(key, data, unless_exist: false, raw: false, expires_in: nil, **)
        ttl = raw ? expires_in&.to_f : nil # a bare counter has no header: the store keeps its expiry
        stored = larder_key(key)
        written = if unless_exist
                    @larder.add(stored, data, ttl: ttl)
                  else
                    @larder.set(stored, data, ttl: ttl)
                    true
                  end
        @outage.answered if @outage&.failing?
        written
      rescue Larder::StoreError => e
        outage_failed(e)&.keep(stored, data, ttl: ttl)
        failed(:write_entry, false, e)
      end

      def delete_entry(key, **_options)
        stored = larder_key(key)
        @outage&.delete(stored)
        failsafe(:delete_entry, returning: false) { @larder.delete(stored) }
      end

      # A larder entry, or a bare counter for raw values.
      def to_larder(entry, race, tags, compressor, threshold)
        expires_at = entry.expires_at ? (entry.expires_at * 1000).round : 0
        stale = race && expires_at.positive? ? RACE_WINDOW_MS : 0
        version = entry.version&.to_s
        if @serializer == "msgpack" && !@custom_coder && !@value_serializer
          # The common case, with its keywords spelt out (no options Hash per write).
          parts = Larder::RubyValues.dump_parts(entry.value, signer: @marshal == :never ? nil : signer,
                                                             marshal: @marshal, off: marshal_off)
          return Larder.encode_serialized(parts, serializer: "msgpack", compressor: compressor, threshold: threshold,
                                                 created_at: created_ms(entry), expires_at: expires_at, stale_ms: stale,
                                                 version: version, tags: tags)
        end

        options = { compressor: compressor, threshold: threshold, created_at: created_ms(entry), expires_at: expires_at,
                    stale_ms: stale, version: version, tags: tags }
        if @custom_coder
          Larder.encode(@custom_coder.dump(entry).b, serializer: "raw", **options)
        elsif @value_serializer
          Larder.encode(@value_serializer.dump(entry.value).b, serializer: "raw", **options)
        else
          Larder.encode(entry.value, serializer: @serializer, **options)
        end
      end

      # The ActiveSupport entry for stored bytes: a larder value entry, or a bare value (a counter). Anything this
      # store cannot use is nil, a miss: a response entry (kind 1, the proxy's pages), an entry that does not
      # decode, a Marshal value it may not load (unsigned, signed under another secret, Marshal off), or what a
      # custom coder or serializer fails to load.
      def to_as_entry(raw)
        unless raw.start_with?(Larder::Header::MAGIC)
          return Entry.new(raw.dup.force_encoding(Encoding::UTF_8), compress: false)
        end

        header, payload = Larder.decode_payload(raw)
        return nil unless header.kind == "value"
        return custom_entry(payload) if @custom_coder && header.serializer == "raw"
        return as_entry(@value_serializer.load(payload), header) if @value_serializer && header.serializer == "raw"

        value = if header.serializer == "msgpack"
                  Larder::RubyValues.load(payload, signer: @marshal == :never ? nil : signer,
                                                   marshal: @marshal != :never)
                else
                  Larder::Serializers.deserialize(header.serializer, payload)
                end
        as_entry(value, header)
      rescue Larder::InvalidEntry => e
        logger&.error("LarderStore: unreadable entry: #{e.message}")
        nil
      rescue Larder::SignedExt::Refused => e
        refused(e.reason)
        nil
      rescue StandardError => e
        raise unless @custom_coder || @value_serializer

        logger&.error("LarderStore: the custom coder or serializer could not load an entry: #{e.class}: #{e.message}")
        nil
      end

      def custom_entry(payload)
        entry = @custom_coder.load(payload)
        entry.is_a?(Entry) ? entry : nil
      end

      # Logs the first refusal of a Marshal value per process and reason (spec/FORMAT.md §2).
      def refused(reason)
        return unless Larder::SignedExt.first_refusal?(reason)

        message = "LarderStore: a Marshal value (ext 101) read as a miss: #{Larder::SignedExt::REASONS[reason]} " \
                  "(logged once per process for this reason)"
        logger ? logger.warn(message) : warn(message)
      end

      # Why Marshal is off, and how to turn it on, for Larder::MarshalDisabled.
      def marshal_off
        if @marshal == :never
          "this store's serializer never uses Marshal (as ActiveSupport 7.1's :message_pack writes none); write " \
            "plain values (nil, booleans, numbers, Strings, Arrays, Hashes with String keys), or use " \
            "serializer: :larder with a signing secret"
        else
          "Marshal is off: no signing secret. Set Rails' secret_key_base, or pass signing_secret: to the store " \
            "(spec/FORMAT.md §2: Marshal values are signed so that no other writer of the store can run code here)"
        end
      end

      def rails_secret
        return nil unless defined?(::Rails) && ::Rails.respond_to?(:application) && ::Rails.application

        secret = ::Rails.application.secret_key_base
        secret.is_a?(String) && !secret.empty? ? secret : nil
      rescue StandardError
        nil
      end

      # The entry's created_at in ms, rounded, for its header: ActiveSupport 6.1's Entry.new has just read the clock
      # (Time.now, which ActiveSupport's tests stub) into its @created_at, in seconds, so it is not read a second time
      # (Time.now cost 4,500 of a write's 70,000 instructions, counted by callgrind); 7.x's entries keep none
      # (0.0), so the clock is read here. An entry written again (race_condition_ttl's stale entry) keeps its
      # created_at, as ActiveSupport's own stores keep it.
      def created_ms(entry)
        created = entry.instance_variable_get(:@created_at)
        return (created * 1000).round if created.is_a?(Float) && created.positive?

        now = Time.now
        (now.to_i * 1000) + ((now.nsec + 500_000) / 1_000_000)
      end

      # An ActiveSupport entry with the larder header's times (ActiveSupport 6.1 keeps created_at and expires_in).
      def as_entry(value, header)
        entry_times(Entry.new(value, compress: false, version: header.version), header.created_at, header.expires_at)
      end

      # Gives `entry` a larder header's times (ms; expires_at 0 = never), as a read of the entry would.
      def entry_times(entry, created_at, expires_at)
        entry.instance_variable_set(:@created_at, created_at / 1000.0) if entry.instance_variable_defined?(:@created_at)
        entry.expires_at = expires_at / 1000.0 unless expires_at.zero?
        entry
      end

      # `serializer:` as a larder serializer name and Marshal's use, or (7.1 API) an object with dump/load.
      def choose_serializer(serializer)
        serializer = :marshal if serializer.equal?(Marshal)
        if serializer.respond_to?(:dump) && serializer.respond_to?(:load)
          @value_serializer = serializer
          @serializer = "raw"
          @marshal = :never
        else
          @serializer, @marshal = SERIALIZERS.fetch(serializer.to_s.to_sym) do
            raise ArgumentError, "unknown serializer #{serializer.inspect} (#{SERIALIZERS.keys.join(', ')}, or an " \
                                 "object with dump/load)"
          end
        end
      end

      # `compressor:` as a larder compressor name; ActiveSupport 7.1's default `Zlib` is gzip.
      def larder_compressor(compressor)
        return "lz4" if compressor.nil?
        return "gzip" if compressor.equal?(Zlib)

        name = compressor.to_s
        if (compressor.is_a?(String) || compressor.is_a?(Symbol)) && Larder::Header::COMPRESSORS.include?(name)
          return name
        end

        raise ArgumentError, "compressor #{compressor.inspect}: a larder entry records its compressor so that every " \
                             "language can decode it; give one of #{Larder::Header::COMPRESSORS.join(', ')} (or Zlib)"
      end

      def failsafe(method, returning: nil)
        yield
      rescue Larder::StoreError => e
        failed(method, returning, e)
      end

      # What failsafe does with a store's error: reported, logged, and `returning` answered in place of the result.
      def failed(method, returning, error)
        if ActiveSupport.respond_to?(:error_reporter)
          ActiveSupport.error_reporter&.report(error, handled: true, severity: :warning)
        end
        logger&.error("LarderStore: #{method} failed, returned #{returning.inspect}: #{error.message}")
        returning
      end
    end
  end
end
