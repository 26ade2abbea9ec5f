# frozen_string_literal: true

require_relative "test_helper"
require "larder/cache"

# The one lock policy's steps in one process (spec/STORES.md §3), with "another process" played by a lock token put
# in the store by hand: a cold miss waits for the holder's value, computes once the lock goes without one or
# lock_ttl passes, polls at a doubling interval, releases its own lock even when the block fails, and computes
# without a lock when the store cannot answer. lock_across_processes_test.rb runs the policy with real processes.
class LockPolicyTest < Minitest::Test
  # A memory store that counts the reads of one key (to see the polling).
  class CountingStore < Larder::Stores::Memory
    attr_reader :reads

    def initialize(watched)
      super()
      @watched = watched
      @reads = []
    end

    def get(key)
      @reads << Process.clock_gettime(Process::CLOCK_MONOTONIC) if key == @watched
      super
    end
  end

  # A memory store on which "another process" finishes at the worst moment: the first time a waiter asks whether
  # the lock is still held, the holder has just written its value and released the lock (after the waiter's last
  # look at the key, before this answer).
  class HolderFinishesBeforeTheLockCheck < Larder::Stores::Memory
    def initialize(lock_key, key, entry)
      super()
      @lock_key = lock_key
      @finish = [key, entry]
    end

    def get(key)
      if key == @lock_key && @finish
        set(*@finish)
        delete(@lock_key)
        @finish = nil
      end
      super
    end
  end

  # A store whose `add` fails as an unreachable server's does.
  class NoLockStore < Larder::Stores::Memory
    def add(*)
      raise Larder::StoreError.new("test", "add refused", server: "nowhere")
    end
  end

  def setup
    @store = Larder::Stores::Memory.new
    @cache = Larder::Cache.new(@store, namespace: "app", lock_ttl: 5)
  end

  def lock_key(key)
    Larder::LockPolicy.lock_key("app:#{key}")
  end

  def hold(key, store = @store)
    assert store.add(lock_key(key), "0123456789abcdef", ttl: 30)
  end

  def test_a_cold_miss_waits_for_the_lock_holders_value
    hold("cold")
    writer = Thread.new do
      sleep 0.15
      @store.set("app:cold", Larder.encode("theirs", ttl_ms: 60_000))
    end
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert_equal "theirs", @cache.fetch("cold", ttl: 60) { flunk "computed while another process held the lock" }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :>=, 0.15
    assert_equal 1, @cache.stats[:coalesced_across_processes]
    refute_nil @store.get(lock_key("cold")), "the other process's lock is left alone"
  ensure
    writer&.join
  end

  def test_a_lock_released_without_a_value_lets_the_waiter_compute
    hold("gone")
    Thread.new do
      sleep 0.1
      @store.delete(lock_key("gone"))
    end
    calls = 0
    assert_equal "mine", @cache.fetch("gone", ttl: 60) { calls += 1 and "mine" }
    assert_equal [1, "mine"], [calls, @cache.read("gone")]
  end

  def test_a_value_written_just_before_the_lock_went_is_served_not_computed
    store = HolderFinishesBeforeTheLockCheck.new(lock_key("late"), "app:late", Larder.encode("theirs", ttl_ms: 60_000))
    hold("late", store)
    cache = Larder::Cache.new(store, namespace: "app", lock_ttl: 5)
    assert_equal "theirs", cache.fetch("late", ttl: 60) { flunk "computed though the holder had written the value" }
    assert_equal [0, 1], [cache.stats[:loads], cache.stats[:coalesced_across_processes]]
  end

  def test_a_waiter_whose_holder_left_without_a_value_takes_the_lock_before_computing
    hold("retake")
    Thread.new do
      sleep 0.05
      @store.delete(lock_key("retake"))
    end
    seen = nil
    computed = @cache.fetch("retake", ttl: 60) do
      seen = @store.get(lock_key("retake"))
      "mine"
    end
    assert_equal "mine", computed
    refute_nil seen, "the waiter computed holding the lock, so other waiters wait on it"
    refute_equal "0123456789abcdef", seen
    assert_nil @store.get(lock_key("retake")), "and released it"
  end

  def test_a_lock_never_released_is_waited_for_lock_ttl_then_computed
    hold("stuck")
    cache = Larder::Cache.new(@store, namespace: "app", lock_ttl: 0.3)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert_equal "late", cache.fetch("stuck", ttl: 60) { "late" }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :>=, 0.3
    assert_equal "0123456789abcdef", @store.get(lock_key("stuck")), "never another's lock released"
  end

  def test_polling_starts_at_5_ms_and_doubles_to_50_ms
    store = CountingStore.new("app:poll")
    hold("poll", store)
    Larder::Cache.new(store, namespace: "app", lock_ttl: 0.6).fetch("poll", ttl: 60) { "x" }
    gaps = store.reads.each_cons(2).map { |a, b| b - a }
    # The first read is the miss; then the lock is taken (held), and the polls follow 5, 10, 20, 40, 50, 50… ms
    # apart (each a little later on a loaded machine, never sooner).
    assert_operator gaps.size, :<=, 16, "no busy polling: at most 600 ms / the schedule"
    assert_operator gaps.size, :>=, 5
    assert_operator gaps.first, :>=, 0.005
    assert gaps.drop(4).all? { |gap| gap >= 0.045 }, "then every 50 ms: #{gaps.inspect}"
  end

  def test_the_lock_is_released_when_the_block_fails
    assert_raises(ArgumentError) { @cache.fetch("fails", ttl: 60) { raise ArgumentError, "loader failed" } }
    assert_nil @store.get(lock_key("fails"))
    stale = Larder.encode("old", created_at: Larder.now_ms - 5000, ttl_ms: 1000, stale_ms: 60_000)
    @store.set("app:fails", stale)
    assert_raises(ArgumentError) { @cache.fetch("fails", ttl: 60) { raise ArgumentError, "refresh failed" } }
    assert_nil @store.get(lock_key("fails"))
  end

  def test_a_value_written_between_the_miss_and_the_lock_is_not_computed_again
    policy = Larder::LockPolicy.new(@store)
    peeks = [Larder::LockPolicy::NONE, "written meanwhile"]
    assert_equal "written meanwhile", policy.run("k", peek: -> { peeks.pop }) { flunk "computed twice" }
    assert_nil @store.get(Larder::LockPolicy.lock_key("k"))
  end

  def test_a_store_that_cannot_lock_computes_without_a_lock
    cache = Larder::Cache.new(NoLockStore.new, namespace: "app")
    assert_equal "computed", cache.fetch("k", ttl: 60) { "computed" }
    assert_equal "computed", cache.read("k")
    assert_equal 1, cache.stats[:store_errors]
  end

  def test_larder_store_takes_the_lock_on_a_cold_miss_and_waits_for_its_holder
    require "active_support/cache/larder_store"
    rails = ActiveSupport::Cache::LarderStore.new(store: @store, namespace: "app", lock_ttl: 5)
    key = Larder::Keys.safe_key(rails.send(:normalize_key, "page", {}))
    assert @store.add(Larder::LockPolicy.lock_key(key), "0123456789abcdef", ttl: 30)
    Thread.new do
      sleep 0.1
      ActiveSupport::Cache::LarderStore.new(store: @store, namespace: "app").write("page", "theirs")
    end
    assert_equal "theirs", rails.fetch("page") { flunk "computed while another process held the lock" }
    @store.delete(Larder::LockPolicy.lock_key(key))
    calls = 0
    assert_equal "mine", rails.fetch("other") { calls += 1 and "mine" }
    assert_equal 1, calls
    assert_nil @store.get(Larder::LockPolicy.lock_key(Larder::Keys.safe_key(rails.send(:normalize_key, "other", {}))))
  end
end
