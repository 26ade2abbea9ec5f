# Larder.Cache.fetch as the post (004) uses it and as spec/STORES.md §3 specifies it: coalescing on the node, the
# store lock across independent caches on one memcached or SQLite file, stale-while-revalidate, versions, tags, failures of the
# fallback, and supervision (killing any process of the cache's tree never crashes a caller).
defmodule Larder.CacheTest do
  use ExUnit.Case, async: true

  alias Larder.Cache

  defp start_cache(opts \\ []) do
    name = :"cache_#{System.unique_integer([:positive])}"
    start_supervised!({Cache, [name: name] ++ opts}, id: name)
    name
  end

  # A generous timeout: these tests check the lock policy, not deadlines, on a loaded machine.
  defp memcached_url(prefix),
    do:
      "memcached://#{Application.fetch_env!(:larder, :test_memcached)}?prefix=#{prefix}&timeout=2s"

  defp shared_url(:memcached, prefix), do: memcached_url(prefix)

  defp shared_url(:sqlite, prefix),
    do: "sqlite://#{System.tmp_dir!()}/larder-ex-cache-#{System.pid()}.db?prefix=#{prefix}"

  test "caches and finds the correct data (the post's own test)" do
    c = start_cache()
    link = %{"id" => 1, "long_url" => "http://www.example.com"}
    assert Cache.fetch(c, "A", fn -> link end) == link
    assert Cache.fetch(c, "A", fn -> "" end) == link
    assert %{hits: 1, misses: 1, loads: 1} = Cache.stats(c)
  end

  # spec/STORES.md §8: no compression attempt on memory:// unless a compressor is named; lz4 on a shared store.
  test "a cache on memory:// stores uncompressed by default, a shared store's compresses with lz4" do
    text = String.duplicate("larder ", 1000)

    compressor = fn c, key ->
      {:ok, <<_::binary-size(5), id, _::binary>>} =
        Larder.Store.get(Cache.store(c), Cache.store_key(c, key))

      id
    end

    memory = start_cache()
    Cache.put(memory, "plain", text)
    assert compressor.(memory, "plain") == 0

    named = start_cache(compressor: :lz4)
    Cache.put(named, "named", text)
    assert compressor.(named, "named") == 1

    shared = start_cache(store: memcached_url("compress#{System.unique_integer([:positive])}:"))
    Cache.put(shared, "shared", text)
    assert compressor.(shared, "shared") == 1
    assert Cache.get(shared, "shared") == text
  end

  test "atom keys come back as strings (values are MessagePack, readable by every language)" do
    c = start_cache()
    Cache.fetch(c, "k", fn -> %{id: 1, slug: "a"} end)
    assert Cache.fetch(c, "k", fn -> flunk("not cached") end) == %{"id" => 1, "slug" => "a"}
  end

  test "a hundred processes missing one key run the fallback once and all get its value" do
    c = start_cache()
    counter = :counters.new(1, [])

    results =
      1..100
      |> Enum.map(fn _ ->
        Task.async(fn ->
          Cache.fetch(c, "hot", fn ->
            :counters.add(counter, 1, 1)
            Process.sleep(50)
            "computed"
          end)
        end)
      end)
      |> Enum.map(&Task.await/1)

    assert Enum.uniq(results) == ["computed"]
    assert :counters.get(counter, 1) == 1
    assert Cache.stats(c).coalesced_waits >= 90
  end

  test "the fallback's exception reaches every waiting caller and nothing is stored" do
    c = start_cache()

    tasks =
      for _ <- 1..10 do
        Task.async(fn ->
          try do
            Cache.fetch(c, "boom", fn ->
              Process.sleep(30)
              raise "no link"
            end)
          rescue
            e -> {:raised, Exception.message(e)}
          end
        end)
      end

    assert Enum.map(tasks, &Task.await/1) |> Enum.uniq() == [{:raised, "no link"}]
    assert Cache.fetch(c, "boom", fn -> "later" end) == "later"
  end

  test "a leader killed mid-fallback leaves its waiters to retry, not hang (its store lock lasts lock_ttl)" do
    c = start_cache(lock_ttl: 200)
    me = self()

    leader =
      spawn(fn ->
        Cache.fetch(c, "dies", fn ->
          send(me, :leading)
          Process.sleep(5000)
        end)
      end)

    assert_receive :leading
    waiter = Task.async(fn -> Cache.fetch(c, "dies", fn -> "from the waiter" end) end)
    Process.sleep(20)
    Process.exit(leader, :kill)
    assert Task.await(waiter, 2000) == "from the waiter"
  end

  test "ttl, versions and tags" do
    c = start_cache()
    assert Cache.fetch(c, "t", fn -> 1 end, ttl: 50) == 1
    assert Cache.fetch(c, "t", fn -> 2 end, ttl: 50) == 1
    Process.sleep(70)
    assert Cache.fetch(c, "t", fn -> 3 end, ttl: 50) == 3

    assert Cache.fetch(c, "v", fn -> "one" end, version: "1") == "one"
    assert Cache.fetch(c, "v", fn -> "two" end, version: "2") == "two"

    Cache.fetch(c, "tagged", fn -> "x" end, tags: ["links"])
    assert {:ok, 1} = Cache.purge_tag(c, "links")
    assert Cache.fetch(c, "tagged", fn -> "y" end) == "y"
  end

  test "a stale entry is served at once while one background task refreshes it" do
    c = start_cache()
    assert Cache.fetch(c, "s", fn -> "old" end, ttl: 30, stale: 10_000) == "old"
    Process.sleep(50)
    me = self()

    stale =
      for _ <- 1..20 do
        Cache.fetch(c, "s", fn -> send(me, :refreshing) && Process.sleep(50) && "new" end,
          ttl: 30_000,
          stale: 10_000
        )
      end

    assert Enum.uniq(stale) == ["old"]
    assert_receive :refreshing
    refute_receive :refreshing, 100
    assert Cache.fetch(c, "s", fn -> "never" end) == "new"
  end

  test "a value MessagePack cannot hold is the caller's error" do
    c = start_cache()
    assert_raise ArgumentError, fn -> Cache.fetch(c, "pid", fn -> self() end) end
  end

  test "killing the cache's processes: callers get misses (the fallback), never a crash; the tree restarts" do
    c = start_cache()
    assert Cache.fetch(c, "k", fn -> 1 end) == 1

    for child <- [:"#{c}.Memory", :"#{c}.Owner"] do
      pid = Process.whereis(child)
      ref = Process.monitor(pid)
      Process.exit(pid, :kill)
      assert_receive {:DOWN, ^ref, _, _, _}
      assert Cache.fetch(c, "k", fn -> 2 end) in [1, 2]
      Process.sleep(30)
    end

    assert Cache.fetch(c, "k2", fn -> 3 end) == 3
    assert Cache.fetch(c, "k2", fn -> 4 end) == 3
  end

  for store <- [:memcached, :sqlite] do
    test "over #{store}, three independent caches (no shared node state) missing one key load it once" do
      prefix = "lock#{System.unique_integer([:positive])}:"
      caches = for _ <- 1..3, do: start_cache(store: shared_url(unquote(store), prefix))
      counter = :counters.new(1, [])

      results =
        for c <- caches, _ <- 1..5 do
          Task.async(fn ->
            Cache.fetch(c, "cold", fn ->
              :counters.add(counter, 1, 1)
              Process.sleep(150)
              "once"
            end)
          end)
        end
        |> Enum.map(&Task.await(&1, 5000))

      assert Enum.uniq(results) == ["once"]
      assert :counters.get(counter, 1) == 1
    end
  end

  test "over memcached, a stale entry seen by independent caches is refreshed once" do
    prefix = "stale#{System.unique_integer([:positive])}:"
    caches = for _ <- 1..3, do: start_cache(store: memcached_url(prefix))
    counter = :counters.new(1, [])
    assert Cache.fetch(hd(caches), "page", fn -> "v1" end, ttl: 1000, stale: 60_000) == "v1"
    Process.sleep(1100)

    # The refresh is held until every caller has been served, so a loaded machine cannot finish it early.
    gate = :atomics.new(1, [])

    load = fn ->
      :counters.add(counter, 1, 1)
      wait_open(gate, 100)
      "v2"
    end

    served =
      for c <- caches, _ <- 1..3, do: Cache.fetch(c, "page", load, ttl: 60_000, stale: 60_000)

    assert Enum.uniq(served) == ["v1"]
    :atomics.put(gate, 1, 1)
    Process.sleep(300)
    assert :counters.get(counter, 1) == 1
    assert Cache.fetch(List.last(caches), "page", fn -> "v3" end) == "v2"
  end

  # Waits (at most `tries` × 50 ms) until the test opens the gate.
  defp wait_open(gate, tries) do
    if :atomics.get(gate, 1) == 0 and tries > 0 do
      Process.sleep(50)
      wait_open(gate, tries - 1)
    end
  end
end
