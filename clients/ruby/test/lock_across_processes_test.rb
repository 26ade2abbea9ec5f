# frozen_string_literal: true

require_relative "test_helper"
require "larder/cache"
require "active_support/cache/larder_store"

# The one lock policy with real processes on a real shared store (spec/STORES.md §3): six forked processes, each with
# its own store client, released together, fetch one key through Larder::Cache or LarderStore on memcached and on
# Redis. A burst of cold misses runs the loader once (the others wait for its value); a burst of reads of one entry
# gone stale refreshes it once (the others are served the stale value). The loader counts its runs in the store.
class LockAcrossProcessesTest < Minitest::Test
  PROCESSES = 6
  LOAD_SECONDS = 0.3

  STORES = { "memcached" => -> { "memcached://#{Servers.shared_memcached}" },
             "redis" => -> { "redis://#{Servers.redis}/0" } }.freeze

  # Each of PROCESSES children opens `url`, says it is ready, waits until all are, runs the block with its store,
  # and sends back the block's result (JSON) or its error. The results, in no particular order.
  def in_processes(url, &)
    ready_r, ready_w = IO.pipe
    go_r, go_w = IO.pipe
    children = Array.new(PROCESSES) do
      out_r, out_w = IO.pipe
      pid = fork do
        [ready_r, go_w, out_r].each(&:close)
        out_w.write(JSON.generate(child_result(url, ready_w, go_r, &)))
        out_w.close
        exit!(0) # never minitest's at_exit run, nor the servers' stop, in a child
      end
      out_w.close
      [pid, out_r]
    end
    [ready_w, go_r].each(&:close)
    assert_equal PROCESSES, ready_r.read(PROCESSES).to_s.size, "every child opened its store"
    go_w.write("x" * PROCESSES)
    go_w.close
    children.map { |_, out| JSON.parse(out.read) }
  ensure
    children&.each do |pid, out|
      out.close unless out.closed?
      Process.wait(pid)
    end
  end

  def child_result(url, ready, start)
    store = Larder::Stores.open(url)
    ready.write("r")
    ready.close
    start.read(1)
    { "value" => yield(store) }
  rescue Exception => e # rubocop:disable Lint/RescueException -- reported to the parent, whatever it is
    { "error" => "#{e.class}: #{e.message}" }
  end

  def loader(store, counter, value)
    store.incr(counter, 1)
    sleep LOAD_SECONDS
    value
  end

  def loads(url, counter)
    Larder::Stores.open(url).get(counter).to_i
  end

  def unique(name)
    "lock-#{name}-#{SecureRandom.hex(4)}"
  end

  STORES.each do |backend, url_of|
    define_method("test_cache_cold_misses_on_#{backend}_run_the_loader_once") do
      url = url_of.call
      namespace = unique("cache-cold")
      counter = "#{namespace}:loads"
      results = in_processes(url) do |store|
        Larder::Cache.new(store, namespace: namespace).fetch("k", ttl: 60) { loader(store, counter, "computed") }
      end
      assert_equal [{ "value" => "computed" }] * PROCESSES, results
      assert_equal 1, loads(url, counter)
    end

    define_method("test_cache_reads_of_a_stale_entry_on_#{backend}_refresh_it_once") do
      url = url_of.call
      namespace = unique("cache-stale")
      counter = "#{namespace}:loads"
      stale = Larder.encode("old", created_at: Larder.now_ms - 5000, ttl_ms: 1000, stale_ms: 60_000)
      Larder::Stores.open(url).set("#{namespace}:k", stale)
      results = in_processes(url) do |store|
        Larder::Cache.new(store, namespace: namespace).fetch("k", ttl: 60, stale: 60) do
          loader(store, counter, "new")
        end
      end
      assert_equal 1, loads(url, counter)
      assert_empty results.map { |r| r["value"] } - %w[old new], results.inspect
      assert_operator results.count { |r| r["value"] == "old" }, :>=, 1, "served stale while one refreshed"
      assert_equal "new", Larder::Cache.new(url, namespace: namespace).read("k")
    end

    define_method("test_larder_store_cold_misses_on_#{backend}_run_the_block_once") do
      url = url_of.call
      namespace = unique("rails-cold")
      counter = "#{namespace}:loads"
      results = in_processes(url) do |store|
        ActiveSupport::Cache::LarderStore.new(store: store, namespace: namespace)
                                         .fetch("k", expires_in: 60) { loader(store, counter, "computed") }
      end
      assert_equal [{ "value" => "computed" }] * PROCESSES, results
      assert_equal 1, loads(url, counter)
    end

    define_method("test_larder_store_reads_of_an_expired_entry_on_#{backend}_refresh_it_once") do
      url = url_of.call
      namespace = unique("rails-stale")
      counter = "#{namespace}:loads"
      ActiveSupport::Cache::LarderStore.new(url, namespace: namespace)
                                       .write("k", "old", expires_in: 0.5, race_condition_ttl: 10)
      sleep 0.6
      results = in_processes(url) do |store|
        ActiveSupport::Cache::LarderStore.new(store: store, namespace: namespace)
                                         .fetch("k", expires_in: 60, race_condition_ttl: 10) do
          loader(store, counter, "new")
        end
      end
      assert_equal 1, loads(url, counter)
      assert_empty results.map { |r| r["value"] } - %w[old new], results.inspect
      assert_operator results.count { |r| r["value"] == "old" }, :>=, 1, "served stale while one refreshed"
      assert_equal "new", ActiveSupport::Cache::LarderStore.new(url, namespace: namespace).read("k")
    end
  end
end
