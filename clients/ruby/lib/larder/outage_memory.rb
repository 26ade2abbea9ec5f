# frozen_string_literal: true

require_relative "stores"

module Larder
  # A cache's outage memory (spec/STORES.md §3, "When the store fails"): a bounded Stores::Memory holding only what
  # was loaded while the store failed. An entry whose write the store failed is kept here, with the expiry the store
  # would have given it (the memory store reads it from the entry, stale window included); a read the store failed is
  # answered from here; deletes and purges apply here too; the first good answer of the store once no failure has been
  # seen for QUIET (one second) empties it, and nothing is written back (other processes may have written newer values
  # meanwhile, and a purge sent during the outage may have been lost). The quiet second: with several servers (a
  # memcached pool losing one, a Redis Cluster failing a master over) the others answer while one fails, and their
  # answers must not drop what the failing one's keys need.
  #
  # `failing?` is one instance variable read: what a cache checks after each good answer of its store; the clock is
  # read only while failing.
  class OutageMemory
    # The default size (the libraries': 16M; `0` turns the outage memory off).
    DEFAULT = 16 << 20
    # Store errors that are answers about the request, not failures of the store (spec/STORES.md §1).
    NOT_FAILURES = [InvalidKey, TooLarge, NotACounter, Unsupported].freeze
    # Seconds without a failure after which a good answer of the store empties the outage memory (§3, rule 4).
    QUIET = 1.0
    # The default clock: monotonic seconds (a wall clock stepped back or forward must not empty or pin it).
    MONOTONIC = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }

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

    # `clock`: what times the quiet second, a callable returning monotonic seconds (replaceable in tests).
    def initialize(capacity, clock: MONOTONIC)
      @memory = Stores::Memory.new(capacity: capacity)
      @failing = false
      @failed_at = nil
      @clock = clock
      @mutex = Mutex.new
    end

    attr_accessor :clock

    def capacity
      @memory.capacity
    end

    # Whether the store failed and the outage memory has not been emptied since (an attribute reader: the cheapest
    # call Ruby makes).
    attr_reader :failing
    alias failing? failing

    # The store failed a request: the quiet second starts again from now.
    def failed!
      @mutex.synchronize do
        @failed_at = @clock.call
        @failing = true
      end
    end

    # The store failed to write `data` (an entry's bytes, or a bare value with its `ttl` in seconds) at `key`: keep
    # it. Stored before the flag is raised, so that whatever is held here is dropped by a good answer that follows
    # once the store has been quiet for QUIET.
    def keep(key, data, ttl: nil)
      @memory.set(key, data, ttl: ttl)
    rescue StoreError
      nil # larger than the whole outage memory: not kept
    ensure
      failed!
    end

    # The store answered: if it has failed, and no failure has been seen for QUIET seconds, everything here is
    # dropped; a good answer within that second (another server of a pool or cluster answering while one fails)
    # keeps it. Callers check `failing?` first, so a healthy store never reaches the clock.
    def answered
      return unless @failing

      @mutex.synchronize do
        next unless @failing && @clock.call - @failed_at >= QUIET

        @failing = false
        @memory.clear
      end
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
