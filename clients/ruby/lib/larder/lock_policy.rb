# frozen_string_literal: true

require_relative "keys"

module Larder
  # larder's one lock policy (spec/STORES.md §3), for Larder::Cache#fetch and LarderStore#fetch: whoever is about to
  # compute a value takes the store's lock first, on a cold miss as on a stale refresh, so N processes that miss one
  # key, or see one entry go stale, run the loader once.
  #
  # 1. Within a process, callers of one key are coalesced: one leads, the others wait for its outcome (or, on a
  #    refresh, are served the stale value at once).
  # 2. The leader takes the lock (`add` of a random token under `internal_key("lock", key)`, ttl `lock_ttl`).
  # 3. Taken: it looks once more (another process may have written the value between this one's miss and its lock),
  #    then computes, writes, and releases the lock with `delete_if`, also when computing fails.
  # 4. Held by another process: a refresh serves the stale value; a cold miss polls the store for the other
  #    process's value (after 5 ms, each pause doubling up to 50 ms) until it appears, the lock disappears without
  #    one (looked for once more then), or `lock_ttl` passes. When the lock went without a value it tries to take
  #    the lock itself (step 3), so that one waiter computes, not all of them; after `lock_ttl` it computes without.
  # 5. The store cannot answer: compute without a lock.
  class LockPolicy
    POLL_FIRST = 0.005
    POLL_MOST = 0.05
    # What `peek` answers when there is no fresh value, and `stale:` when there is no stale one to serve.
    NONE = Object.new.freeze
    # What `await` answers when the other process's value did not come: its lock went without one, or lock_ttl passed.
    LOCK_GONE = Object.new.freeze
    WAITED_LOCK_TTL = Object.new.freeze

    # A computation in progress in this process: waiters block on it until the leader finishes.
    class Flight
      def initialize
        @mutex = Mutex.new
        @done = ConditionVariable.new
        @finished = false
      end

      def finish(value: nil, error: nil)
        @mutex.synchronize do
          @value = value
          @error = error
          @finished = true
          @done.broadcast
        end
      end

      def wait
        @mutex.synchronize { @done.wait(@mutex) until @finished }
        raise @error if @error

        @value
      end
    end

    attr_reader :lock_ttl

    # `store`: a Larder store. `lock_ttl`: seconds. `count`: called with a counter's name (:coalesced,
    # :coalesced_across_processes, :stale_served, :store_errors, :loads).
    def initialize(store, lock_ttl: 10, count: ->(_name) {})
      @store = store
      @lock_ttl = lock_ttl
      @count = count
      @flights = {}
      @mutex = Mutex.new
    end

    # The value for `key` (the key as the cache stores it, before the store's prefix). `stale`: the stale value a
    # refresh may serve, or NONE on a cold miss. `peek`: a fresh value from the store, or NONE. The block computes
    # and writes the value and returns it; what it raises reaches this caller and the threads waiting on it.
    def run(key, stale: NONE, peek: -> { NONE }, &compute)
      flight, lead = join_or_lead(key)
      unless lead
        return served_stale(stale) unless stale.equal?(NONE)

        @count.call(:coalesced)
        return flight.wait
      end
      begin
        value = compute_as_leader(key, stale, peek, &compute)
        finish(key, flight, value: value)
        value
      rescue Exception => e # rubocop:disable Lint/RescueException -- the waiting threads must hear of an interrupt too
        finish(key, flight, error: e)
        raise
      end
    end

    # Keys being computed in this process now.
    def computing
      @mutex.synchronize { @flights.size }
    end

    # The lock key of `key` (spec/STORES.md §3; the store adds its prefix).
    def self.lock_key(key)
      Keys.safe_key("larder\u0000lock:#{key}")
    end

    private

    def join_or_lead(key)
      @mutex.synchronize do
        flight = @flights[key]
        next [flight, false] if flight

        [@flights[key] = Flight.new, true]
      end
    end

    def finish(key, flight, value: nil, error: nil)
      @mutex.synchronize { @flights.delete(key) }
      flight.finish(value: value, error: error)
    end

    def compute_as_leader(key, stale, peek, &)
      lock_key = self.class.lock_key(key)
      token = Stores::Base.token
      deadline = nil
      loop do
        taken = take(lock_key, token)
        return compute_under(lock_key, token, taken, peek, &) unless taken == false
        return served_stale(stale) unless stale.equal?(NONE)

        deadline ||= clock + @lock_ttl
        value = await(lock_key, peek, deadline)
        return compute_under(lock_key, token, nil, peek, &) if value.equal?(WAITED_LOCK_TTL)
        return value unless value.equal?(LOCK_GONE)
        # The lock went away without a value: take it, so that one waiter computes and the others wait on it.
      end
    end

    # Computes holding the lock (`taken` true: looks once more first, since a holder that released just before may
    # have written the value, and releases the lock however this ends), or without a lock (`taken` nil).
    def compute_under(lock_key, token, taken, peek)
      if taken
        value = peek.call
        return coalesced(value) unless value.equal?(NONE)
      end
      @count.call(:loads)
      yield
    ensure
      release(lock_key, token) if taken
    end

    # true when taken, false when another holds it, nil when the store did not answer.
    def take(lock_key, token)
      @store.add(lock_key, token, ttl: @lock_ttl)
    rescue StoreError
      @count.call(:store_errors)
      nil
    end

    def release(lock_key, token)
      @store.delete_if(lock_key, token)
    rescue StoreError
      @count.call(:store_errors)
    end

    # The other process's value; LOCK_GONE once its lock is gone without one, WAITED_LOCK_TTL once `deadline` passed.
    def await(lock_key, peek, deadline)
      pause = POLL_FIRST
      loop do
        sleep pause
        pause = [pause * 2, POLL_MOST].min
        value = peek.call
        return coalesced(value) unless value.equal?(NONE)
        return WAITED_LOCK_TTL if clock >= deadline
        next if held?(lock_key)

        # The holder may have written the value between the look above and its release: look once more.
        value = peek.call
        return value.equal?(NONE) ? LOCK_GONE : coalesced(value)
      end
    end

    def coalesced(value)
      @count.call(:coalesced_across_processes)
      value
    end

    # A store that does not answer holds no lock one could wait for.
    def held?(lock_key)
      !@store.get(lock_key).nil?
    rescue StoreError
      @count.call(:store_errors)
      false
    end

    def served_stale(stale)
      @count.call(:stale_served)
      stale
    end

    def clock
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
