# Hostile servers (larder-hostile, crates/testkit): each misbehaviour a server can show (dripping, oversized,
# deeply nested, endless line, garbage, silence) ends every operation (reads, writes, counters, scripts, purges,
# clear: every command's reply path, issue 32) within the store's timeout plus a small margin, with the store's own
# error naming the server, without reading past the size bound (spec/STORES.md §2).
defmodule Larder.HostileTest do
  # Not async: these tests measure time, so they do not share the CPU with the heavy async tests.
  use ExUnit.Case, async: false

  alias Larder.{Store, StoreError, TestServers}

  @root Path.expand("../../..", __DIR__)
  @timeout 300

  setup_all do
    bin = System.get_env("LARDER_HOSTILE") || Path.join(@root, "target/debug/larder-hostile")

    unless File.exists?(bin),
      do:
        flunk(
          "#{bin} is missing: cargo build -p larder-testkit (or run make test at the repository root)"
        )

    %{bin: bin}
  end

  for protocol <- ["memcached", "redis"],
      mode <- ["drip", "huge", "nested", "endless-line", "garbage", "silent"],
      not (protocol == "memcached" and mode == "nested") do
    test "#{protocol} #{mode}", %{bin: bin} do
      {handle, port} =
        TestServers.hostile(bin, unquote(protocol), unquote(mode), [
          "--size",
          "#{4 * 1024 * 1024}"
        ])

      scheme = unquote(protocol)

      # failures=1000: the server is never ejected, so every operation reaches its reply reader.
      u =
        "#{scheme}://127.0.0.1:#{port}?timeout=#{@timeout}ms&failures=1000&max_#{if scheme == "redis", do: "value", else: "item"}=1M"

      {:ok, s} = Larder.Stores.open(u)

      ops = [
        get: &Store.get(&1, "k"),
        get_many: &Store.get_many(&1, ["a", "b"]),
        set: &Store.set(&1, "k", "v"),
        add: &Store.add(&1, "k", "v"),
        delete: &Store.delete(&1, "k"),
        delete_if: &Store.delete_if(&1, "k", "v"),
        incr: &Store.incr(&1, "n", 1),
        purge_tag: &Store.purge_tag(&1, "t"),
        purge_prefix: &Store.purge_prefix(&1, "p"),
        clear: &Store.clear/1
      ]

      for {name, op} <- ops do
        {micros, result} = :timer.tc(fn -> op.(s) end)

        assert {:error, %StoreError{kind: kind, server: server}} = result,
               "#{name}: #{inspect(result)}"

        assert kind in [:timeout, :malformed, :unavailable], "#{name}: #{kind}"
        assert server == "127.0.0.1:#{port}", "#{name}"
        assert micros < (@timeout + 150) * 1000, "#{name} took #{div(micros, 1000)} ms"
      end

      TestServers.stop(handle)
    end
  end
end
