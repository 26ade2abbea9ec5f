# frozen_string_literal: true

require "larder/lock_policy"

module ActiveSupport
  module Cache
    # LarderStore#fetch with a block, under larder's one lock policy (spec/STORES.md §3, Larder::LockPolicy): the
    # callers of one key in this process are coalesced, and the one that leads takes the store's lock before it runs
    # the block, on a cold miss as on an expired entry, so the processes sharing the store run the block once. A
    # leader that finds the lock held serves the expired value when `race_condition_ttl` allows it (within that many
    # seconds past expiry, as ActiveSupport does), and otherwise waits for the holder's value (polling the store, at
    # most the store's `lock_ttl:`, default 10 s) instead of computing it too. The leader that holds the lock does
    # what ActiveSupport's fetch does with an expired entry (writes it back for race_condition_ttl, or deletes it),
    # then runs the block and writes its result. `force: true` computes at once, as ActiveSupport's fetch does.
    module LarderStoreFetch
      def fetch(name, options = nil, &block)
        options = merged_options(options) if block
        return super if block.nil? || options[:force]

        key = normalize_key(name, options)
        version = normalize_version(name, options)
        # The entry as ActiveSupport's fetch reads it (instrumented as a read; nil for another version), read here
        # and not in a method of its own: a hit is the common fetch, and a method frame and a second expired? were
        # 1,200 of its 43,900 instructions (callgrind)
        entry = nil
        hit = false
        instrument(:read, name, options) do |payload|
          entry = read_entry(key, **options, event: payload)
          entry = nil if entry&.mismatched?(version)
          hit = !entry.nil? && !entry.expired?
          if payload
            payload[:super_operation] = :fetch
            payload[:hit] = hit
          end
        end
        return get_entry_value(entry, name, options) if hit

        stale = entry && within_race_window?(entry, options) ? entry.value : Larder::LockPolicy::NONE
        @lock_policy.run(larder_key(key), stale: stale, peek: -> { fresh_value(key, version) }) do
          handle_expired_entry(entry, key, options) if entry
          generate(name, options, &block)
        end
      end

      private

      def within_race_window?(entry, options)
        race_ttl = options[:race_condition_ttl].to_f
        race_ttl.positive? && Time.now.to_f - entry.expires_at <= race_ttl
      end

      # A fresh value of `key` in the store itself (not the local cache, which would remember the miss), or NONE.
      def fresh_value(key, version)
        raw = read_raw(larder_key(key))
        entry = raw && to_as_entry(raw)
        return Larder::LockPolicy::NONE if entry.nil? || entry.expired? || entry.mismatched?(version)

        entry.value
      end

      # ActiveSupport's save_block_result_to_cache (whose arguments differ between 6.1 and 7.1).
      def generate(name, options)
        result = instrument(:generate, name, options) { yield(name) }
        write(name, result, options) unless result.nil? && options[:skip_nil]
        result
      end
    end
  end
end
