# memcached and Redis stores against real servers (started by test_helper.exs), files and SQLite: the same behaviour
# on all (spec/STORES.md §2–§7), the memcached ring and its ejection, the refused keys of stores.json, and entries that
# cross between Elixir and the Rust binary (`larder store get|set`) both ways.
defmodule Larder.RemoteStoresTest do
  use ExUnit.Case, async: true

  alias Larder.{Entry, Store, StoreError, TestServers}

  @root Path.expand("../../..", __DIR__)

  # Generous timeouts: these tests check behaviour on a loaded machine; hostile_test.exs checks the deadlines.
  defp url(:memcached, prefix),
    do:
      "memcached://#{Application.fetch_env!(:larder, :test_memcached)}?prefix=#{prefix}&timeout=2s"

  defp url(:redis, prefix),
    do: "redis://#{Application.fetch_env!(:larder, :test_redis)}/0?prefix=#{prefix}&timeout=2s"

  defp url(:file, prefix) do
    dir = Path.join(System.tmp_dir!(), "larder-ex-files-#{System.pid()}")
    "file://#{dir}?prefix=#{prefix}"
  end

  defp url(:sqlite, prefix),
    do: "sqlite://#{System.tmp_dir!()}/larder-ex-sqlite-#{System.pid()}.db?prefix=#{prefix}"

  defp open(kind) do
    prefix = "t#{System.unique_integer([:positive])}:"
    {:ok, s} = Larder.Stores.open(url(kind, prefix))
    {s, url(kind, prefix)}
  end

  for kind <- [:memcached, :redis, :file, :sqlite] do
    describe "#{kind}" do
      test "set, get, add, delete, delete_if, get_many" do
        {s, _} = open(unquote(kind))
        assert :ok = Store.set(s, "a", "1")
        assert {:ok, "1"} = Store.get(s, "a")
        assert :miss = Store.get(s, "b")
        assert {:ok, false} = Store.add(s, "a", "2")
        assert {:ok, true} = Store.add(s, "b", "2", 10_000)
        assert {:ok, %{"a" => "1", "b" => "2"}} = Store.get_many(s, ["a", "b", "c"])
        assert {:ok, false} = Store.delete_if(s, "b", "x")
        assert {:ok, true} = Store.delete_if(s, "b", "2")
        assert {:ok, true} = Store.delete(s, "a")
        assert {:ok, false} = Store.delete(s, "a")
        big = :crypto.strong_rand_bytes(200_000)
        assert :ok = Store.set(s, "big", big)
        assert {:ok, ^big} = Store.get(s, "big")
      end

      test "expiry from the entry's hard expiry; a write already past it stores nothing" do
        {s, _} = open(unquote(kind))
        now = Store.now_ms()
        Store.set(s, "old", "keep")

        assert :ok =
                 Store.set(
                   s,
                   "old",
                   Entry.encode("x", created_at: now - 9000, expires_at: now - 5000)
                 )

        assert :miss = Store.get(s, "old")

        assert {:ok, false} =
                 Store.add(
                   s,
                   "old",
                   Entry.encode("x", created_at: now - 9000, expires_at: now - 5000)
                 )

        assert :ok = Store.set(s, "soon", Entry.encode("x", ttl_ms: 1000))
        assert {:ok, _} = Store.get(s, "soon")
      end

      test "counters" do
        {s, _} = open(unquote(kind))
        assert {:ok, 5} = Store.incr(s, "c", 5)
        assert {:ok, 7} = Store.incr(s, "c", 2)
        assert {:ok, 4} = Store.incr(s, "c", -3)
        assert :missing = Store.incr(s, "none", 1, nil, false)
        Store.set(s, "text", "abc")
        assert {:error, %StoreError{kind: :not_a_counter}} = Store.incr(s, "text", 1)
      end

      test "purge by tag and by prefix hide what they name, and nothing else" do
        {s, _} = open(unquote(kind))
        old = Store.now_ms() - 5000
        Store.set(s, "p:1", Entry.encode(1, tags: ["red"], created_at: old))
        Store.set(s, "p:2", Entry.encode(2, tags: ["blue"], created_at: old))
        Store.set(s, "q:1", Entry.encode(3, tags: ["red"], created_at: old))
        Store.set(s, "q:2", Entry.encode(4, created_at: old))
        assert {:ok, _} = Store.purge_tag(s, "red")
        assert {:ok, _} = Store.purge_prefix(s, "p:")
        assert {:ok, found} = Store.get_many(s, ["p:1", "p:2", "q:1", "q:2"])
        assert Map.keys(found) == ["q:2"]
      end

      test "every key stores.json refuses is refused before anything is sent" do
        {s, _} = open(unquote(kind))
        doc = Larder.JSON.decode!(File.read!(Path.join(@root, "spec/vectors/stores.json")))

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
            assert {:error, %StoreError{kind: :invalid_key}} = result
          end
        end

        for %{"kind" => "accepted", "key_hex" => hex} <- doc["cases"] do
          key = Base.decode16!(hex, case: :mixed)
          assert :ok = Store.set(s, key, "v")
          assert {:ok, "v"} = Store.get(s, key)
        end
      end

      test "entries cross between Elixir and the Rust binary both ways" do
        {s, u} = open(unquote(kind))
        bin = System.get_env("LARDER_BIN") || Path.join(@root, "target/debug/larder")

        entry =
          Entry.encode(%{"from" => "elixir", "n" => [1, 2.5, nil]}, tags: ["x"], version: "v1")

        assert :ok = Store.set(s, "ex-key", entry)
        {out, 0} = System.cmd(bin, ["store", "get", "ex-key", "--store", u])
        assert out == entry

        rust_entry = Path.join(System.tmp_dir!(), "rust-#{System.unique_integer([:positive])}")

        {_, 0} =
          System.cmd("sh", [
            "-c",
            "echo '{\"from\":\"rust\",\"big\":\"#{String.duplicate("r", 3000)}\"}' | #{bin} encode --ttl 60 > #{rust_entry}"
          ])

        {_, 0} = System.cmd(bin, ["store", "set", "rs-key", rust_entry, "--store", u])
        assert {:ok, raw} = Store.get(s, "rs-key")
        assert {:ok, %Entry{compressor: :lz4, value: %{"from" => "rust"}}} = Entry.decode(raw)
        File.rm(rust_entry)
      end
    end
  end

  test "file: add under flock is won by one of many concurrent callers; links and foreign files are left alone" do
    dir = Path.join(System.tmp_dir!(), "larder-ex-flock-#{System.unique_integer([:positive])}")
    {:ok, s} = Larder.Stores.open("file://#{dir}")

    # The lock lives for a minute: twenty flock(1) processes may take seconds to start on a loaded machine, and a
    # lock that expired before the last caller tried would rightly be won again.
    wins =
      1..20
      |> Enum.map(fn i -> Task.async(fn -> Store.add(s, "lock", "t#{i}", 60_000) end) end)
      |> Enum.map(&Task.await(&1, 15_000))

    assert Enum.count(wins, &(&1 == {:ok, true})) == 1

    File.write!(Path.join(dir, "notes.txt"), "an operator's file")
    File.mkdir_p!(Path.join(dir, "ab/cd"))
    File.write!(Path.join(dir, "ab/cd/" <> String.duplicate("a", 64)), "LDR1 not ours")
    assert :ok = Store.set(s, "k", "v")
    target = Path.join(dir, "elsewhere")
    File.write!(target, "secret")
    h = Base.encode16(:crypto.hash(:sha256, "linked"), case: :lower)
    File.mkdir_p!(Path.join([dir, binary_part(h, 0, 2), binary_part(h, 2, 2)]))
    File.ln_s!(target, Path.join([dir, binary_part(h, 0, 2), binary_part(h, 2, 2), h]))
    assert :miss = Store.get(s, "linked")
    assert :ok = Store.clear(s)
    assert File.read!(Path.join(dir, "notes.txt")) == "an operator's file"
    assert File.exists?(Path.join(dir, "ab/cd/" <> String.duplicate("a", 64)))
    assert File.read!(target) == "secret"
    assert :miss = Store.get(s, "k")
    File.rm_rf!(dir)
  end

  test "memcached: keys go where ketama sends them; a dead server is ejected and its keys move" do
    {a, pa} = TestServers.memcached()
    {b, pb} = TestServers.memcached()

    # A dead server refuses at once; the timeout only bounds A's answers, so it is long enough for a loaded
    # machine (a slow A would be ejected too, as the rule says, and the test would measure the machine).
    u = "memcached://127.0.0.1:#{pa},127.0.0.1:#{pb}?timeout=5s&failures=2&retry_after=60s"
    {:ok, s} = Larder.Stores.open(u)
    ring = Larder.Ring.new([{"127.0.0.1", pa, 1}, {"127.0.0.1", pb, 1}])
    keys = for i <- 1..40, do: "key#{i}"
    for k <- keys, do: assert(:ok = Store.set(s, k, k))

    # Each key is on the server the ring names, and only there.
    {:ok, only_a} = Larder.Stores.open("memcached://127.0.0.1:#{pa}")

    for k <- keys,
        do: assert(Larder.Ring.server(ring, k) == 0 == match?({:ok, _}, Store.get(only_a, k)))

    TestServers.stop(b, pb)
    on_a = Enum.filter(keys, &(Larder.Ring.server(ring, &1) == 0))
    on_b = keys -- on_a

    # STORES.md §4.3 with failures=2: the first request for one of B's keys fails and counts one failure; the
    # second ejects B and is retried on the key's new server (A, where it is a miss); every later one goes to A.
    results = for k <- on_b, do: Store.get(s, k)
    assert [{:error, %StoreError{server: server}} | rest] = results
    assert server == "127.0.0.1:#{pb}"
    assert Enum.all?(rest, &(&1 == :miss)), inspect(rest)
    for k <- on_a, do: assert({:ok, ^k} = Store.get(s, k))
    k = List.last(on_b)
    assert :ok = Store.set(s, k, "moved")
    assert {:ok, "moved"} = Store.get(only_a, k)
    TestServers.stop(a, pa)
  end

  test "memcached: with every server down, requests fail fast with the server named" do
    {a, pa} = TestServers.memcached()
    {:ok, s} = Larder.Stores.open("memcached://127.0.0.1:#{pa}?timeout=10s&retry_after=60s")
    TestServers.stop(a, pa)
    assert {:error, %StoreError{server: server}} = Store.get(s, "k")
    assert server == "127.0.0.1:#{pa}"
    Store.get(s, "k")

    # Ejected: refused without a connection attempt, so far below the 10 s timeout even on a loaded machine.
    {micros, result} = :timer.tc(fn -> Store.get(s, "k") end)
    assert {:error, %StoreError{kind: :unavailable, message: "every server is ejected"}} = result
    assert micros < 2_000_000
  end
end
