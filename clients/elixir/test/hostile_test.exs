# Hostile servers (larder-hostile, crates/testkit): each misbehaviour a server can show (dripping, oversized,
# deeply nested, endless line, garbage, silence) ends every read within the store's timeout plus a small margin,
# with the store's own error naming the server, without reading past the size bound (spec/STORES.md §2).
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

      u =
        "#{scheme}://127.0.0.1:#{port}?timeout=#{@timeout}ms&max_#{if scheme == "redis", do: "value", else: "item"}=1M"

      {:ok, s} = Larder.Stores.open(u)

      for op <- [fn -> Store.get(s, "k") end, fn -> Store.get_many(s, ["a", "b"]) end] do
        {micros, result} = :timer.tc(op)
        assert {:error, %StoreError{kind: kind, server: server}} = result
        assert kind in [:timeout, :malformed, :unavailable]
        assert server == "127.0.0.1:#{port}"
        assert micros < (@timeout + 150) * 1000, "took #{div(micros, 1000)} ms"
      end

      TestServers.stop(handle)
    end
  end
end
