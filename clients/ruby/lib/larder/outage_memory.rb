# frozen_string_literal: true

require_relative "stores"

module Larder
  # A cache's outage memory (spec/STORES.md §3, "When the store fails"): a bounded Stores::Memory holding only what
  # was loaded while the store failed. An entry whose write the store failed is kept here, with the expiry the store
  # would have given it (the memory store reads it from the entry, stale window included); a read the store failed is
  # answered from here; deletes and purges apply here too; the first good answer of the store after a failure empties
  # it, and nothing is written back (other processes may have written newer values meanwhile, and a purge sent during
  # the outage may have been lost).
  #
  # `failing?` is one instance variable read: what a cache checks after each good answer of its store.
  class OutageMemory
    # The default size (the libraries': 16M; `0` turns the outage memory off).
    DEFAULT = 16 << 20
    # Store errors that are answers about the request, not failures of the store (spec/STORES.md §1).
    NOT_FAILURES = [InvalidKey, TooLarge, NotACounter, Unsupported].freeze

    # The outage memory for the option's value (bytes, or a size as the store URLs write it: "16M"), or nil for 0.
    def self.for(size)
      bytes = size.is_a?(String) ? StoreUrl.parse_size(size) : size
      unless bytes.is_a?(Integer) && !bytes.negative?
        raise ArgumentError, "outage_memory: #{size.inspect} is not a size (bytes, or 512K, 16M, 1G; 0 = off)"
      end

      bytes.zero? ? nil : new(bytes)
    end

    # Whether `error` is a failure of the store (no connection, a timeout, a broken or malformed reply, a request
    # refused at once while the server is ejected), as opposed to its answer that the request is wrong.
    def self.failure?(error)
      error.is_a?(StoreError) && NOT_FAILURES.none? { |kind| error.is_a?(kind) }
    end

    def initialize(capacity)
      @memory = Stores::Memory.new(capacity: capacity)
      @failing = false
    end

    def capacity
      @memory.capacity
    end

    # Whether the store failed since its last good answer (an attribute reader: the cheapest call Ruby makes).
    attr_reader :failing
    alias failing? failing

    # The store failed a request.
    def failed!
      @failing = true
    end

    # The store failed to write `data` (an entry's bytes, or a bare value with its `ttl` in seconds) at `key`: keep
    # it. Stored before the flag is raised, so that whatever is held here is dropped by a good answer that follows.
    def keep(key, data, ttl: nil)
      @memory.set(key, data, ttl: ttl)
    rescue StoreError
      nil # larger than the whole outage memory: not kept
    ensure
      @failing = true
    end

    # The store answered: after a failure, everything here is dropped.
    def answered
      return unless @failing

      @failing = false
      @memory.clear
    end

    def get(key)
      @memory.get(key)
    rescue StoreError
      nil
    end

    def get_many(keys)
      keys.map { |key| get(key) }
    end

    def delete(key)
      @memory.delete(key)
    rescue StoreError
      false
    end

    def purge_tag(tag)
      @memory.purge_tag(tag)
    rescue StoreError
      0
    end

    def purge_prefix(prefix)
      @memory.purge_prefix(prefix)
    rescue StoreError
      0
    end

    def clear
      @memory.clear
    end

    # Entries held now, and their bytes (as the memory store counts them).
    def size
      @memory.size
    end

    def bytes
      @memory.bytes
    end
  end
end
