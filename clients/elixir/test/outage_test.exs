# The cache's outage memory and in-process coalescing while its store fails (spec/STORES.md §3, "When the store
# fails"), on a store that fails on demand (Larder.TestFlakyStore). outage.json runs the same rules through
# larder-faults against real servers (test/hostile_vectors_test.exs).
defmodule Larder.OutageTest do
  use ExUnit.Case, async: true

  alias Larder.{Cache, Stores, TestFlakyStore}

  defp start_cache(store, opts \\ []) do
    name = :"outage_#{System.unique_integer([:positive])}"
    start_supervised!({Cache, [name: name, store: store] ++ opts}, id: name)
    name
  end

  defp outage(cache), do: Stores.Memory.handle(:"#{cache}.Outage")

  defp counting(value) do
    loads = :counters.new(1, [:atomics])
    {fn -> :counters.add(loads, 1, 1) && value end, fn -> :counters.get(loads, 1) end}
  end

  test "a value whose write fails is kept with the entry's expiry, and answers the reads the store fails" do
    store = TestFlakyStore.new()
    c = start_cache(store)
    TestFlakyStore.mode(store, :down)
    {loader, loads} = counting("v1")

    assert Cache.fetch(c, "k", loader, ttl: 300) == "v1"
    assert Cache.fetch(c, "k", loader, ttl: 300) == "v1"
    assert Cache.get(c, "k") == "v1"
    assert loads.() == 1
    assert %{outage_kept: 1, outage_served: 2} = Cache.stats(c)
    # Nothing reached the store.
    assert TestFlakyStore.raw(store, Cache.store_key(c, "k")) == :miss

    # Kept with the expiry the store would have given it: gone once the TTL has passed.
    Process.sleep(350)
    assert Cache.get(c, "k") == nil
    assert Cache.fetch(c, "k", loader, ttl: 300) == "v1"
    assert loads.() == 2
  end

  test "the stale window is kept too: a stale copy is served while the refresh fails again" do
    store = TestFlakyStore.new()
    c = start_cache(store)
    TestFlakyStore.mode(store, :down)
    assert Cache.fetch(c, "k", fn -> "old" end, ttl: 100, stale: 5_000) == "old"
    Process.sleep(150)
    assert Cache.fetch(c, "k", fn -> "new" end, ttl: 100, stale: 5_000) == "old"
  end

  test "the store's first good answer (even a miss) once no failure for a second empties it, nothing written back" do
    store = TestFlakyStore.new()
    c = start_cache(store)
    TestFlakyStore.mode(store, :down)
    assert Cache.fetch(c, "a", fn -> "outage-a" end, ttl: 60_000) == "outage-a"
    assert Cache.fetch(c, "b", fn -> "outage-b" end, ttl: 60_000) == "outage-b"
    assert Larder.Store.get(outage(c), Cache.store_key(c, "b")) != :miss

    TestFlakyStore.mode(store, :up)
    # Past the quiet second (spec/STORES.md §3 rule 4).
    Process.sleep(1_100)
    # A miss from the store: the loader runs again, and the outage copies are gone.
    assert Cache.fetch(c, "a", fn -> "fresh-a" end, ttl: 60_000) == "fresh-a"
    assert Larder.Store.get(outage(c), Cache.store_key(c, "b")) == :miss
    assert TestFlakyStore.raw(store, Cache.store_key(c, "b")) == :miss

    TestFlakyStore.mode(store, :down)
    assert Cache.get(c, "b") == nil
  end

  test "a good answer within a second of a failure keeps it (the others of a pool answer while one fails)" do
    store = TestFlakyStore.new()
    c = start_cache(store)
    TestFlakyStore.mode(store, :down)
    assert Cache.fetch(c, "a", fn -> "outage-a" end, ttl: 60_000) == "outage-a"

    # Good answers right after the failure, and failures among them, as while one server of several fails: each
    # failure starts the quiet second again, so none of these answers empties the outage memory.
    for _ <- 1..8 do
      TestFlakyStore.mode(store, :up)
      assert Cache.get(c, "elsewhere") == nil
      Process.sleep(150)
      assert Cache.get(c, "elsewhere") == nil
      TestFlakyStore.mode(store, :down)
      assert Cache.get(c, "a") == "outage-a"
    end

    assert Larder.Store.get(outage(c), Cache.store_key(c, "a")) != :miss
    assert %{outage_served: 8} = Cache.stats(c)

    # A second with no failure: the next good answer empties it.
    TestFlakyStore.mode(store, :up)
    Process.sleep(1_100)
    assert Cache.get(c, "elsewhere") == nil
    assert Larder.Store.get(outage(c), Cache.store_key(c, "a")) == :miss
    TestFlakyStore.mode(store, :down)
    assert Cache.get(c, "a") == nil
  end

  test "deletes and purges apply to it" do
    store = TestFlakyStore.new()
    c = start_cache(store, namespace: "ns")
    TestFlakyStore.mode(store, :down)

    for k <- ~w(gone user:1 user:2 other), do: Cache.fetch(c, k, fn -> k end, ttl: 60_000)
    assert Cache.get(c, "gone") == "gone"

    assert {:error, _} = Cache.delete(c, "gone")
    assert Cache.get(c, "gone") == nil

    assert {:error, _} = Cache.purge_prefix(c, "user:")
    assert Cache.get(c, "user:1") == nil
    assert Cache.get(c, "user:2") == nil
    assert Cache.get(c, "other") == "other"
  end

  test "only failures of the store are kept: a refused write (too_large, invalid_key) is not" do
    store = TestFlakyStore.new()
    c = start_cache(store)

    for kind <- [:too_large, :invalid_key, :not_a_counter] do
      TestFlakyStore.mode(store, {:refuse, kind})
      assert Cache.fetch(c, "k#{kind}", fn -> "v" end, ttl: 60_000) == "v"
      TestFlakyStore.mode(store, :down)
      assert Cache.get(c, "k#{kind}") == nil
    end

    assert %{outage_kept: 0} = Cache.stats(c)
  end

  test "its size is bounded by outage_memory (parsed as store URLs' sizes)" do
    store = TestFlakyStore.new()
    c = start_cache(store, outage_memory: "64K")
    TestFlakyStore.mode(store, :down)
    # Not compressible (the cache compresses with lz4 on a shared store).
    value = Base.encode64(:crypto.strong_rand_bytes(1_500))
    for i <- 1..200, do: Cache.fetch(c, "k#{i}", fn -> value end, ttl: 60_000)

    stats = Stores.Memory.stats(:"#{c}.Outage")
    assert stats.capacity == 64 * 1024
    assert stats.bytes <= 64 * 1024
    assert stats.evictions > 0
    # The newest are kept, the oldest evicted.
    assert Cache.get(c, "k200") == value
    assert Cache.get(c, "k1") == nil
  end

  test "outage_memory: 0 turns it off (and a bad size is refused)" do
    store = TestFlakyStore.new()
    c = start_cache(store, outage_memory: 0)
    assert Process.whereis(:"#{c}.Outage") == nil
    TestFlakyStore.mode(store, :down)
    {loader, loads} = counting("v")
    assert Cache.fetch(c, "k", loader, ttl: 60_000) == "v"
    assert Cache.fetch(c, "k", loader, ttl: 60_000) == "v"
    assert loads.() == 2
    assert %{outage_kept: 0, outage_served: 0} = Cache.stats(c)

    assert {:error, reason} =
             start_supervised(
               {Cache, name: :outage_bad_size, store: store, outage_memory: "16 apples"},
               id: :outage_bad_size
             )

    assert inspect(reason) =~ "outage_memory: \\\"16 apples\\\" is not a size"
  end

  test "the default is 16M; a cache on memory:// has none" do
    c = start_cache(TestFlakyStore.new())
    assert Stores.Memory.stats(:"#{c}.Outage").capacity == 16 * 1024 * 1024
    m = start_cache("memory://")
    assert Process.whereis(:"#{m}.Outage") == nil
  end

  test "a healthy store is read first: the outage memory answers only when the store fails" do
    store = TestFlakyStore.new()
    c = start_cache(store)
    TestFlakyStore.mode(store, :down)
    assert Cache.fetch(c, "k", fn -> "outage" end, ttl: 60_000) == "outage"
    # Another process writes the store meanwhile; the store answering wins.
    TestFlakyStore.mode(store, :up)
    Larder.Store.set(store, Cache.store_key(c, "k"), Larder.Entry.encode("newer", ttl_ms: 60_000))
    assert Cache.get(c, "k") == "newer"
  end

  # Rule 1: the callers of one key share one load and get the leader's value in memory, even when the lock cannot
  # be taken and the write fails, with the outage memory off (so nothing but coalescing can answer them).
  test "concurrent callers share one load while the store fails, without the outage memory" do
    store = TestFlakyStore.new()
    c = start_cache(store, outage_memory: 0)
    TestFlakyStore.mode(store, :down)
    loads = :counters.new(1, [:atomics])

    loader = fn ->
      :counters.add(loads, 1, 1)
      Process.sleep(200)
      "shared"
    end

    tasks = for _ <- 1..32, do: Task.async(fn -> Cache.fetch(c, "hot", loader, ttl: 60_000) end)
    assert Enum.map(tasks, &Task.await(&1, 5_000)) == List.duplicate("shared", 32)
    assert :counters.get(loads, 1) == 1

    # Each caller read the store once before it joined the leader; the leader tried the lock and the write; no
    # waiter read the store again to get the value.
    assert TestFlakyStore.calls(store) <= 32 + 2
  end
end
