# frozen_string_literal: true

require_relative "test_helper"
require "minitest/mock"
require "larder/cache"
require "active_support/cache/larder_store"

# The cache's outage memory (spec/STORES.md §3, "When the store fails"; Larder::OutageMemory) over a store that fails
# on demand: kept on a failed write with the store's expiry, answered on a failed read, emptied by the first good
# answer once no failure has been seen for a second (kept by one within that second), deletes and purges applied,
# bounded, off at 0; and fetch's one load per process while the store fails. The quiet second is timed on the outage
# memory's clock, set here by hand (`at`), so no test sleeps through it.
class OutageMemoryTest < Minitest::Test
  # A memory store that fails every request while `down` (as a remote store does: a StoreError naming the server),
  # optionally after `pause` seconds (a timeout), and counts what reached it.
  class FlakyStore < Larder::Stores::Base
    BACKEND = "flaky"
    attr_accessor :down, :pause, :error
    attr_reader :inner, :requests

    def initialize
      super
      @inner = Larder::Stores::Memory.new
      @down = false
      @pause = 0
      @error = nil
      @requests = Hash.new(0)
      @mutex = Mutex.new
    end

    %i[get get_many set set_many add delete delete_if incr purge_tag purge_prefix clear].each do |name|
      define_method(name) do |*args, **options|
        @mutex.synchronize { @requests[name] += 1 }
        fail_now
        @inner.public_send(name, *args, **options)
      end
    end

    private

    def fail_now
      raise @error if @error
      return unless @down

      sleep @pause if @pause.positive?
      raise Larder::StoreError.new(BACKEND, "timed out after 150 ms", server: "127.0.0.1:1")
    end
  end

  def setup
    @store = FlakyStore.new
    @cache = Larder::Cache.new(@store, namespace: "app")
    @now = 1000.0
    outage.clock = -> { @now }
  end

  def outage
    @cache.outage_memory
  end

  # Moves the outage memory's clock `seconds` on.
  def later(seconds)
    @now += seconds
  end

  def test_on_by_default_with_16m_and_sized_like_the_store_urls
    assert_equal 16 << 20, outage.capacity
    assert_equal 512 << 10, Larder::Cache.new(@store, outage_memory: "512K").outage_memory.capacity
    assert_equal 1000, Larder::Cache.new(@store, outage_memory: 1000).outage_memory.capacity
    assert_raises(ArgumentError) { Larder::Cache.new(@store, outage_memory: "lots") }
    assert_nil Larder::Cache.new(Larder::Stores::Memory.new).outage_memory, "memory:// cannot fail: none"
    assert_same outage, @cache.namespace("other").outage_memory, "namespaces share the cache's outage memory"
  end

  def test_a_failed_write_is_kept_with_the_expiry_the_store_would_give_it
    now = Larder.now_ms
    @store.down = true
    Larder.stub(:now_ms, now) { refute @cache.write("k", "v", ttl: 10, stale: 5) }
    assert_equal 1, outage.size
    Larder.stub(:now_ms, now + 9_000) { assert_equal "v", @cache.read("k"), "a failed read is answered from it" }
    Larder.stub(:now_ms, now + 12_000) do
      assert_nil @cache.read("k"), "past its freshness, as from the store"
      refute_nil outage.get("app:k"), "kept through the stale window"
    end
    Larder.stub(:now_ms, now + 15_001) { assert_nil outage.get("app:k"), "gone past the stale window" }
  end

  def test_a_failed_read_is_answered_from_it_and_fetch_loads_once
    @store.down = true
    loads = 0
    3.times { assert_equal "v1", @cache.fetch("k", ttl: 60) { loads += 1 and "v1" } }
    assert_equal 1, loads
    assert @cache.exist?("k")
    assert_equal({ "k" => "v1" }, @cache.read_multi("k", "other"))
    assert_operator @cache.stats[:outage_hits], :>=, 2
  end

  def test_the_first_good_answer_once_quiet_for_a_second_empties_it_and_nothing_is_written_back
    @store.down = true
    @cache.fetch("k", ttl: 60) { "v1" }
    @cache.write_multi({ "a" => 1, "b" => 2 }, ttl: 60)
    assert_equal 3, outage.size
    assert outage.failing?
    @store.down = false
    later(1.0)
    assert_nil @cache.read("other"), "a miss is a good answer"
    assert_equal 0, outage.size
    refute outage.failing?
    assert_nil @cache.read("k"), "the store never had it"
    assert_nil @store.inner.get("app:k"), "nothing written back"
    assert_equal "v2", @cache.fetch("k", ttl: 60) { "v2" }, "loaded again once the store answers"
    assert_equal "v2", Larder.decode(@store.inner.get("app:k")).value
  end

  def test_a_good_write_also_empties_it
    @store.down = true
    @cache.write("k", "v1", ttl: 60)
    @store.down = false
    later(1.5)
    assert @cache.write("other", "x", ttl: 60)
    assert_equal 0, outage.size
  end

  # Rule 4: with several servers, the others answer while one fails; their answers within a second of the last
  # failure must not drop what the failing one's keys need. Each failure starts the quiet second again.
  def test_a_good_answer_within_a_second_of_a_failure_keeps_it
    @store.down = true
    assert_equal "v1", @cache.fetch("k", ttl: 60) { "v1" }
    @store.down = false
    later(0.5)
    assert_nil @cache.read("other"), "a good answer half a second after the failure"
    assert @cache.write("other", "x", ttl: 60), "and a good write"
    assert_equal 1, outage.size, "kept"
    assert outage.failing?
    @store.down = true
    later(0.4)
    assert_equal "v1", @cache.fetch("k", ttl: 60) { flunk "loaded again while the outage memory holds it" }
    @store.down = false
    later(0.9)
    assert_equal "x", @cache.read("other"), "0.9 s after the last failure (1.3 s after the first)"
    assert_equal 1, outage.size, "still kept: the failure 0.9 s ago started the second again"
    later(0.1)
    assert_equal "x", @cache.read("other")
    assert_equal 0, outage.size, "emptied once no failure has been seen for a second"
    refute outage.failing?
  end

  def test_its_clock_is_monotonic_by_default
    fresh = Larder::OutageMemory.new(1024)
    assert_same Larder::OutageMemory::MONOTONIC, fresh.clock
    assert_in_delta Process.clock_gettime(Process::CLOCK_MONOTONIC), fresh.clock.call, 1.0
    assert_in_delta 1.0, Larder::OutageMemory::QUIET
  end

  # The quiet second on the real clock: a good answer right after the failure keeps it, one after a second empties it.
  def test_the_quiet_second_on_the_real_clock
    cache = Larder::Cache.new(@store, namespace: "app")
    @store.down = true
    failed_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    cache.write("k", "v1", ttl: 60)
    @store.down = false
    assert_nil cache.read("other")
    within = Process.clock_gettime(Process::CLOCK_MONOTONIC) - failed_at < Larder::OutageMemory::QUIET
    assert_equal 1, cache.outage_memory.size if within # (a starved machine may have taken the whole second)
    sleep Larder::OutageMemory::QUIET + 0.05
    assert_nil cache.read("other")
    assert_equal 0, cache.outage_memory.size
  end

  def test_deletes_and_purges_apply_to_it
    @store.down = true
    @cache.write("gone", "v", ttl: 60)
    @cache.write("kept", "v", ttl: 60)
    @cache.write("tagged", "v", ttl: 60, tags: ["t"])
    @cache.write("pre:1", "v", ttl: 60)
    refute @cache.delete("gone")
    assert_nil @cache.read("gone")
    assert_raises(Larder::StoreError) { @cache.purge_tag("t") }
    assert_nil @cache.read("tagged")
    assert_raises(Larder::StoreError) { @cache.purge_prefix("pre:") }
    assert_nil @cache.read("pre:1")
    assert_equal "v", @cache.read("kept")
    assert_raises(Larder::StoreError) { @cache.clear }
    assert_nil @cache.read("kept")
  end

  def test_the_size_bound_holds
    cache = Larder::Cache.new(@store, namespace: "app", outage_memory: "8K")
    @store.down = true
    100.times { |i| cache.write("k#{i}", "x" * 200, ttl: 60) }
    assert_operator cache.outage_memory.bytes, :<=, 8 << 10
    assert_operator cache.outage_memory.size, :<, 100
    assert_equal "x" * 200, cache.read("k99"), "the most recent kept"
    assert_nil cache.read("k0"), "the oldest evicted"
    refute cache.write("huge", SecureRandom.hex(16 << 10), ttl: 60)
    assert_nil cache.read("huge"), "larger than the whole memory: not kept"
  end

  def test_zero_turns_it_off
    cache = Larder::Cache.new(@store, namespace: "app", outage_memory: 0)
    assert_nil cache.outage_memory
    @store.down = true
    loads = 0
    3.times { assert_equal "v", cache.fetch("k", ttl: 60) { loads += 1 and "v" } }
    assert_equal 3, loads, "every fetch loads when nothing is kept"
  end

  def test_answers_that_the_request_was_wrong_are_not_failures
    @store.error = Larder::TooLarge.new("flaky", "the server refused the value")
    refute @cache.write("k", "v", ttl: 60)
    assert_equal 0, outage.size
    refute outage.failing?
    assert Larder::OutageMemory.failure?(Larder::StoreError.new("memcached", "timed out", server: "h:1"))
    refute Larder::OutageMemory.failure?(Larder::InvalidKey.new("memcached", "a b", "a space"))
    refute Larder::OutageMemory.failure?(Larder::NotACounter.new("redis", "not a counter"))
  end

  def test_larder_store_keeps_answers_and_drops_as_the_cache_does
    rails = ActiveSupport::Cache::LarderStore.new(store: @store, namespace: "app", outage_memory: "1M")
    assert_equal 1 << 20, rails.outage_memory.capacity
    rails.outage_memory.clock = -> { @now }
    @store.down = true
    loads = 0
    3.times { assert_equal "v1", rails.fetch("k", expires_in: 60) { loads += 1 and "v1" } }
    assert_equal 1, loads
    refute rails.write("gone", "x")
    assert_equal({ "k" => "v1" }, rails.read_multi("k", "other"))
    refute rails.delete("gone")
    assert_nil rails.read("gone"), "deletes apply"
    @store.down = false
    assert_nil rails.read("other")
    assert_equal 1, rails.outage_memory.size, "kept by a good answer within the quiet second"
    later(1.0)
    assert_nil rails.read("other")
    assert_equal 0, rails.outage_memory.size, "emptied by the first good answer once quiet for a second"
    assert_nil rails.read("k"), "nothing written back"
    assert_nil ActiveSupport::Cache::LarderStore.new(store: @store, outage_memory: 0).outage_memory
    assert_nil ActiveSupport::Cache::LarderStore.new("memory://").outage_memory
  end

  # Rule 1: the threads of one process share one load while the store times out on every request (its lock cannot
  # be taken, its write fails); the waiters take the leader's value in memory, not from the store.
  def test_concurrent_fetches_share_one_load_while_the_store_times_out
    @store.down = true
    @store.pause = 0.05
    loads = Queue.new
    threads = Array.new(16) do
      Thread.new { @cache.fetch("k", ttl: 60) { sleep 0.05 and loads << 1 and "v" } }
    end
    assert_equal ["v"] * 16, threads.map(&:value)
    assert_equal 1, loads.size
    assert_equal 1, @store.requests[:set], "the leader's write alone"
    assert_operator @store.requests[:get], :<=, 16, "one read per caller: no waiter polls the store"
  end
end
