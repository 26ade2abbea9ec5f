# frozen_string_literal: true

require_relative "../larder"
require_relative "stores"
require_relative "lock_policy"
require_relative "outage_memory"

module Larder
  # The cache programs call: values in the shared entry format over any store (mirrors crates/cache).
  #
  #   cache = Larder::Cache.new("memcached://127.0.0.1:11211", namespace: "app")
  #   cache.fetch("user:7", ttl: 60, stale: 10) { load_user(7) }
  #
  # - larder's one lock policy (spec/STORES.md §3, Larder::LockPolicy): a miss is computed by one thread of this
  #   process, the others waiting for its result (or its error); that thread first takes the store's lock, so that
  #   across the processes sharing the store the block runs once: one that finds the lock held waits for the
  #   holder's value (polling the store, at most `lock_ttl`) instead of computing it too.
  # - Within an entry's stale window, one caller in all the processes recomputes (under the same lock) while every
  #   other is served the stale value at once.
  # - A store that fails reads as a miss and skips writes (counted in `stats`); a block that raises caches nothing.
  # - When the store fails (spec/STORES.md §3): what `fetch` (or `write`) could not write is kept in the cache's
  #   outage memory (`outage_memory`, 16M by default, 0 = off; Larder::OutageMemory) and a read the store fails is
  #   answered from there, so a dead store does not send every request to the block; the first good answer of the
  #   store once no failure has been seen for a second empties it. The threads of one process that fetch one key
  #   share its one computation in memory, whatever the store answers.
  # - Values are serialized with `serializer` (msgpack by default: nil, booleans, numbers, Strings, Arrays and
  #   Hashes, readable by every language).
  class Cache
    attr_reader :store, :namespace_name, :stats

    # `store`: a store or a store URL. Times in seconds: `ttl` (nil = none), `stale` (the stale window), `lock_ttl`
    # (the store lock's TTL: how long a computation may block other processes, default 10 s). `compressor`: lz4 by
    # default, none on memory:// (its bytes never leave the process: spec/STORES.md §8). `outage_memory`: the size
    # of the outage memory, in bytes or as the store URLs write sizes ("16M"); 0 turns it off (a memory:// store,
    # which cannot fail, has none).
    def initialize(store, namespace: nil, serializer: "msgpack", compressor: nil, threshold: DEFAULT_THRESHOLD,
                   ttl: nil, stale: 0, lock_ttl: 10, max_size: Compressors::DEFAULT_MAX_SIZE,
                   outage_memory: OutageMemory::DEFAULT, shared: nil)
      @store = store.is_a?(String) ? Stores.open(store) : store
      @namespace_name = namespace
      compressor ||= @store.is_a?(Stores::Memory) ? "none" : "lz4"
      @encoding = { serializer: serializer, compressor: compressor, threshold: threshold }
      @ttl = ttl
      @stale = stale
      @lock_ttl = lock_ttl
      @max_size = max_size
      @shared = shared || new_shared(outage_memory)
      @stats = @shared[:stats]
      @outage = @shared[:outage]
    end

    # The outage memory (Larder::OutageMemory), or nil when it is off.
    def outage_memory
      @outage
    end

    # The same cache (store, flights, stats) under another namespace.
    def namespace(name)
      self.class.new(@store, namespace: name, ttl: @ttl, stale: @stale, lock_ttl: @lock_ttl, max_size: @max_size,
                             shared: @shared, **@encoding)
    end

    # The key the store sees for `key` (FORMAT.md §5.2).
    def store_key(key)
      Keys.namespaced_key(@namespace_name, key.to_s)
    end

    # The value, or nil on a miss (an expired entry, another version, or a store that failed).
    def read(key, version: nil)
      entry = lookup(store_key(key), version)
      entry && !entry.expired? ? entry.value : nil
    end

    def exist?(key, version: nil)
      entry = lookup(store_key(key), version)
      !entry.nil? && !entry.expired?
    end

    # Stores `value`; false when the store failed.
    def write(key, value, ttl: @ttl, stale: @stale, version: nil, tags: [])
      put(store_key(key), encode(value, ttl, stale, version, tags), ttl, stale)
    end

    def delete(key)
      stored = store_key(key)
      @outage&.delete(stored)
      answered(@store.delete(stored))
    rescue StoreError => e
      store_failed(e)
      false
    end

    # {key => value} for the keys found fresh, in one round trip where the store allows.
    def read_multi(*keys, version: nil)
      keys = keys.flatten
      values = get_many(keys.map { |key| store_key(key) })
      keys.zip(values).each_with_object({}) do |(key, raw), found|
        entry = decode(raw, version)
        found[key] = entry.value if entry && !entry.expired?
      end
    end

    def write_multi(hash, ttl: @ttl, stale: @stale, version: nil, tags: [])
      items = hash.to_h { |key, value| [store_key(key), encode(value, ttl, stale, version, tags)] }
      begin
        @store.set_many(items)
      rescue StoreError => e
        store_failed(e)&.then { |outage| items.each { |stored, data| outage.keep(stored, data) } }
        return false
      end
      answered(true)
    end

    # The value for `key`; on a miss the block computes it and it is stored (see the class comment).
    def fetch(key, ttl: @ttl, stale: @stale, version: nil, tags: [], &block)
      raise ArgumentError, "fetch needs a block" unless block

      stored = store_key(key)
      entry = lookup(stored, version)
      if entry && !entry.expired?
        count(:hits)
        return entry.value
      end
      count(:misses) unless entry
      policy = @shared[:lock_policy]
      policy.run(stored, stale: entry ? entry.value : LockPolicy::NONE, peek: -> { peek(stored, version) }) do
        load_and_store(stored, key, [ttl, stale, version, tags], &block)
      end
    end

    # {key => value} for every key: the ones found in one round trip, the others computed by the block.
    def fetch_multi(*keys, ttl: @ttl, stale: @stale, version: nil, tags: [])
      keys = keys.flatten
      found = read_multi(keys, version: version)
      keys.to_h do |key|
        next [key, found[key]] if found.key?(key)

        [key, fetch(key, ttl: ttl, stale: stale, version: version, tags: tags) { yield key }]
      end
    end

    # Counters (spec/STORES.md §3): not entries, so every language shares them.
    def increment(key, by = 1, ttl: nil)
      @store.incr(store_key(key), by, ttl: ttl)
    end

    def decrement(key, by = 1, ttl: nil)
      @store.incr(store_key(key), -by, ttl: ttl)
    end

    # The purges apply to the outage memory too; the store's error is raised.
    def purge_tag(tag)
      @outage&.purge_tag(tag)
      answered(@store.purge_tag(tag))
    end

    # Every key of this namespace starting with `prefix`.
    def purge_prefix(prefix)
      prefix = @namespace_name ? "#{@namespace_name}:#{prefix}" : prefix
      @outage&.purge_prefix(prefix)
      answered(@store.purge_prefix(prefix))
    end

    # Empties the store (every namespace: memcached's flush_all, Redis's FLUSHDB, ...) and the outage memory.
    def clear
      @outage&.clear
      answered(@store.clear)
    end

    # Keys being computed in this process now.
    def computing
      @shared[:lock_policy].computing
    end

    private

    def new_shared(outage_memory)
      mutex = Mutex.new
      stats = Hash.new(0)
      count = ->(name) { mutex.synchronize { stats[name] += 1 } }
      outage = OutageMemory.for(outage_memory) unless @store.is_a?(Stores::Memory)
      { mutex: mutex, stats: stats, lock_policy: LockPolicy.new(@store, lock_ttl: @lock_ttl, count: count),
        outage: outage }
    end

    # A fresh value for `stored`, or LockPolicy::NONE (for the lock policy's polling).
    def peek(stored, version)
      entry = lookup(stored, version)
      entry && !entry.expired? ? entry.value : LockPolicy::NONE
    end

    # The leader's computation. While the store fails, a fresh value in the outage memory is used first: a caller
    # that missed before another thread's flight kept its value there must not run the block again.
    def load_and_store(stored, key, options)
      ttl, stale, version, tags = options
      if @outage&.failing? && (entry = decode(@outage.get(stored), version)) && !entry.expired?
        count(:outage_hits)
        return entry.value
      end
      value = yield key
      put(stored, encode(value, ttl, stale, version, tags), ttl, stale)
      value
    end

    def encode(value, ttl, stale, version, tags)
      Larder.encode(value, **@encoding, ttl_ms: ttl ? (ttl * 1000).ceil : 0, stale_ms: (stale * 1000).ceil,
                                        version: version&.to_s, tags: tags)
    end

    def put(stored, data, _ttl, _stale)
      begin
        @store.set(stored, data)
      rescue StoreError => e
        store_failed(e)&.keep(stored, data)
        return false
      end
      count(:writes)
      answered(true)
    end

    def lookup(stored, version)
      raw = begin
        answered(@store.get(stored))
      rescue StoreError => e
        store_failed(e)&.then { |outage| outage_hit(outage.get(stored)) }
      end
      decode(raw, version)
    end

    def get_many(stored_keys)
      answered(@store.get_many(stored_keys))
    rescue StoreError => e
      store_failed(e)&.get_many(stored_keys) || ([nil] * stored_keys.size)
    end

    # `result`, after emptying the outage memory if the store had failed before this good answer and no failure has
    # been seen for a second since (spec/STORES.md §3, rule 4). A healthy store's hit costs one instance variable
    # read here.
    def answered(result)
      @outage.answered if @outage&.failing?
      result
    end

    # Counts the store's error; the outage memory when it is a failure of the store (not an answer that the request
    # was wrong), now marked failing, else nil.
    def store_failed(error)
      count(:store_errors)
      return nil unless @outage && OutageMemory.failure?(error)

      @outage.failed!
      @outage
    end

    def outage_hit(raw)
      count(:outage_hits) if raw
      raw
    end

    # The entry in `raw` if it is one this caller may use: right version, not past its hard expiry.
    def decode(raw, version)
      return nil if raw.nil?

      entry = Larder.decode(raw, max_size: @max_size)
      return nil if entry.kind != "value" || entry.version != version&.to_s
      return nil if entry.hard_expiry && entry.hard_expiry <= Larder.now_ms

      entry
    rescue InvalidEntry
      count(:invalid_entries)
      nil
    end

    def count(name)
      @shared[:mutex].synchronize { @stats[name] += 1 }
    end
  end
end
