# The memory store (spec/STORES.md §8): an ETS table owned by a GenServer, read without a call, bounded by bytes
# and entries, swept by a janitor, refusing unsafe keys before anything else, and surviving its owner's death.
defmodule Larder.MemoryStoreTest do
  use ExUnit.Case, async: true

  alias Larder.{Entry, Store}
  alias Larder.Stores.Memory

  setup do
    name = :"mem_#{System.unique_integer([:positive])}"
    start_supervised!({Memory, name: name, capacity: 64 * 1024, janitor_ms: 50})
    %{store: Memory.handle(name), name: name}
  end

  defp wait_until(fun, n) do
    cond do
      fun.() -> :ok
      n == 0 -> flunk("timed out")
      true -> Process.sleep(10) && wait_until(fun, n - 1)
    end
  end

  test "set, get, add, delete, delete_if, get_many", %{store: s} do
    assert :ok = Store.set(s, "a", "1")
    assert {:ok, "1"} = Store.get(s, "a")
    assert :miss = Store.get(s, "b")
    assert {:ok, false} = Store.add(s, "a", "2")
    assert {:ok, true} = Store.add(s, "b", "2")
    assert {:ok, %{"a" => "1", "b" => "2"}} = Store.get_many(s, ["a", "b", "c"])
    assert {:ok, false} = Store.delete_if(s, "b", "x")
    assert {:ok, true} = Store.delete_if(s, "b", "2")
    assert {:ok, true} = Store.delete(s, "a")
    assert {:ok, false} = Store.delete(s, "a")
  end

  test "expiry: by TTL, by the entry's hard expiry, and a write already past it stores nothing",
       %{store: s} do
    assert :ok = Store.set(s, "t", "v", 30)
    assert {:ok, "v"} = Store.get(s, "t")
    Process.sleep(40)
    assert :miss = Store.get(s, "t")

    now = Store.now_ms()
    old = Entry.encode("x", created_at: now - 10_000, expires_at: now - 5000, stale_ms: 1000)
    assert :ok = Store.set(s, "old", "keep")
    assert :ok = Store.set(s, "old", old)
    assert :miss = Store.get(s, "old")
    assert {:ok, false} = Store.add(s, "old", old)

    stale = Entry.encode("x", created_at: now - 10_000, expires_at: now - 5000, stale_ms: 60_000)
    assert :ok = Store.set(s, "stale", stale)
    assert {:ok, ^stale} = Store.get(s, "stale")
  end

  test "bounded: oldest-written entries leave first; a value over a sixteenth of capacity is refused",
       %{store: s, name: n} do
    value = :binary.copy("x", 2000)
    for i <- 1..100, do: assert(:ok = Store.set(s, "k#{i}", value))
    stats = Memory.stats(n)
    assert stats.bytes <= 64 * 1024
    assert stats.evictions > 0
    assert :miss = Store.get(s, "k1")
    assert {:ok, _} = Store.get(s, "k100")

    assert {:error, %Larder.StoreError{kind: :too_large}} =
             Store.set(s, "big", :binary.copy("x", 5000))
  end

  test "counters: created, added to, saturating, and not_a_counter", %{store: s} do
    assert {:ok, 5} = Store.incr(s, "c", 5)
    assert {:ok, 2} = Store.incr(s, "c", -3)
    assert :missing = Store.incr(s, "none", 1, nil, false)
    assert {:ok, 9_223_372_036_854_775_807} = Store.incr(s, "c", 9_223_372_036_854_775_807)
    Store.set(s, "text", "abc")
    assert {:error, %Larder.StoreError{kind: :not_a_counter}} = Store.incr(s, "text", 1)
    assert {:ok, "abc"} = Store.get(s, "text")
  end

  test "purges by tag and prefix are exact", %{store: s} do
    Store.set(s, "p:1", Entry.encode(1, tags: ["red"]))
    Store.set(s, "p:2", Entry.encode(2, tags: ["blue"]))
    Store.set(s, "q:1", Entry.encode(3, tags: ["red"]))
    assert {:ok, 2} = Store.purge_tag(s, "red")
    assert {:ok, 1} = Store.purge_prefix(s, "p:")
    assert {:ok, %{}} = Store.get_many(s, ["p:1", "p:2", "q:1"])
  end

  test "the janitor sweeps expired entries", %{store: s, name: n} do
    Store.set(s, "j", "v", 10)
    Process.sleep(150)
    assert Memory.stats(n).expired >= 1
  end

  test "every key stores.json says to refuse is refused by every operation", %{store: s} do
    doc =
      Larder.JSON.decode!(File.read!(Path.expand("../../../spec/vectors/stores.json", __DIR__)))

    for %{"kind" => "refused", "key_hex" => hex} <- doc["cases"] do
      key = Base.decode16!(hex, case: :mixed)

      for result <- [
            Store.get(s, key),
            Store.set(s, key, "v"),
            Store.add(s, key, "v"),
            Store.delete(s, key),
            Store.delete_if(s, key, "v"),
            Store.incr(s, key, 1),
            Store.get_many(s, ["ok", key])
          ] do
        assert {:error, %Larder.StoreError{kind: :invalid_key}} = result
      end
    end
  end

  test "killing the owner: calls answer unavailable, never crash; the supervisor restarts it empty",
       %{store: s, name: n} do
    Store.set(s, "a", "1")
    pid = Process.whereis(n)
    ref = Process.monitor(pid)
    Process.exit(pid, :kill)
    assert_receive {:DOWN, ^ref, _, _, _}
    result = Store.get(s, "a")
    assert result == :miss or match?({:error, %Larder.StoreError{kind: :unavailable}}, result)

    # The new owner is registered before its init has made the table, so wait for answers, not for the name
    # (up to 10 s: a loaded machine restarts it late, and until then every call is unavailable, never a crash).
    wait_until(
      fn ->
        Process.whereis(n) not in [nil, pid] and
          not match?({:error, %Larder.StoreError{kind: :unavailable}}, Store.get(s, "a"))
      end,
      1000
    )

    assert :miss = Store.get(s, "a")
    assert :ok = Store.set(s, "a", "2")
    assert {:ok, "2"} = Store.get(s, "a")
  end
end
