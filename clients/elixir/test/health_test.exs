# Failure and recovery of a remote server (spec/STORES.md §1): ejection after `failures`, and probation one probe at
# a time (while the probe is out, every other request for the server still fails at once). Unit tests of
# Larder.Stores.Health, then the memcached and Redis stores behind larder-faults (LARDER_FAULTS, default
# target/debug/larder-faults) freezing a real server.
defmodule Larder.HealthTest do
  use ExUnit.Case, async: true

  alias Larder.Store
  alias Larder.Stores.Health

  @root Path.expand("../../..", __DIR__)

  defp id, do: {:health_test, System.unique_integer([:positive])}

  test "failures eject; after retry_after exactly one caller probes, the others still find it ejected" do
    id = id()
    assert Health.admit(id, 0, 1_000, 500) == :up
    assert Health.failure(id, 0, 2, 500, 1_000) == :counted
    assert Health.admit(id, 0, 1_000, 500) == :up
    assert Health.failure(id, 0, 2, 500, 1_000) == :ejected
    assert Health.admit(id, 0, 1_499, 500) == :ejected

    # Probation: one probe; while it is out, the others fail at once.
    assert Health.admit(id, 0, 1_500, 500) == :probe
    assert Health.admit(id, 0, 1_501, 500) == :ejected
    assert Health.admit(id, 0, 1_900, 500) == :ejected

    # The probe fails: ejected again at once (one failure), for retry_after.
    assert Health.failure(id, 0, 2, 500, 1_600) == :ejected
    assert Health.admit(id, 0, 2_099, 500) == :ejected
    assert Health.admit(id, 0, 2_100, 500) == :probe

    # The probe succeeds: back in service for everyone.
    assert Health.success(id, 0) == :ok
    assert Health.admit(id, 0, 2_101, 500) == :up
    assert Health.admit(id, 0, 2_102, 500) == :up
    assert Health.errors(id, 0) == 3
  end

  test "a probe that never reports holds the server out for one more retry_after, then the next request probes" do
    id = id()
    Health.failure(id, 0, 1, 100, 0)
    assert Health.admit(id, 0, 100, 100) == :probe
    assert Health.admit(id, 0, 199, 100) == :ejected
    assert Health.admit(id, 0, 200, 100) == :probe
  end

  test "a probe given back (its request went to other servers) can be taken again at once" do
    id = id()
    Health.failure(id, 0, 1, 100, 0)
    assert {:due, 100} = Health.state(id, 0, 150)
    assert Health.claim(id, 0, 100, 250)
    assert Health.state(id, 0, 150) == :ejected
    refute Health.claim(id, 0, 100, 250)
    assert Health.release(id, 0, 100, 250)
    assert Health.admit(id, 0, 150, 100) == :probe
  end

  test "of many callers arriving together after retry_after, exactly one probes" do
    for _ <- 1..20 do
      id = id()
      Health.failure(id, 0, 1, 10, 0)
      Health.refused(id, 0)

      results =
        1..64
        |> Enum.map(fn _ -> Task.async(fn -> Health.admit(id, 0, 10, 10) end) end)
        |> Enum.map(&Task.await/1)

      assert Enum.count(results, &(&1 == :probe)) == 1
      assert Enum.count(results, &(&1 == :ejected)) == 63
    end
  end

  # ----------------------------------------------------------------------- stores behind larder-faults

  defp faults(upstream) do
    bin = System.get_env("LARDER_FAULTS") || Path.join(@root, "target/debug/larder-faults")
    port = Port.open({:spawn_executable, bin}, [:binary, {:line, 4096}, args: [upstream]])

    receive do
      {^port, {:data, {:eol, "127.0.0.1:" <> _ = addr}}} -> {port, addr}
    after
      10_000 -> flunk("#{bin} printed no address")
    end
  end

  defp command(port, line) do
    Port.command(port, line <> "\n")

    receive do
      {^port, {:data, {:eol, "ok" <> _}}} -> :ok
    after
      5_000 -> flunk("larder-faults did not answer #{line}")
    end
  end

  defp timed(fun) do
    started = System.monotonic_time(:millisecond)
    result = fun.()
    {System.monotonic_time(:millisecond) - started, result}
  end

  defp back?(store, key, tries) do
    cond do
      Store.get(store, key) == {:ok, "v"} -> true
      tries == 0 -> false
      true -> Process.sleep(100) == :ok and back?(store, key, tries - 1)
    end
  end

  for protocol <- [:memcached, :redis] do
    test "#{protocol}: a frozen server is probed by one request at a time; the others fail at once" do
      upstream = Application.fetch_env!(:larder, unquote(:"test_#{protocol}"))

      # The port goes with the test's process, and larder-faults exits when its standard input closes.
      {port, addr} = faults(upstream)

      url =
        case unquote(protocol) do
          :memcached -> "memcached://#{addr}"
          :redis -> "redis://#{addr}/0"
        end

      # retry_after shorter than timeout: the probe's window must still outlast the probe.
      {:ok, store} = Larder.Stores.open(url <> "?timeout=600ms&failures=1&retry_after=300ms")
      key = "probe-#{System.unique_integer([:positive])}"
      assert :ok = Store.set(store, key, "v")

      command(port, "freeze")
      # The failure that ejects it pays the timeout; then requests fail at once.
      assert {took, {:error, %{kind: :timeout}}} = timed(fn -> Store.get(store, key) end)
      assert took >= 550
      assert {took, {:error, %{kind: :unavailable}}} = timed(fn -> Store.get(store, key) end)
      assert took < 250

      # Probation: of 8 requests together, one waits for its timeout, 7 fail at once; so does one sent while the
      # probe is still out after retry_after has passed again.
      Process.sleep(350)

      probes = for _ <- 1..8, do: Task.async(fn -> timed(fn -> Store.get(store, key) end) end)

      Process.sleep(400)
      assert {took, {:error, %{kind: :unavailable}}} = timed(fn -> Store.get(store, key) end)
      assert took < 250
      timings = Enum.map(probes, &Task.await(&1, 5_000))

      assert Enum.all?(timings, &match?({_, {:error, _}}, &1))
      assert timings |> Enum.filter(fn {t, _} -> t >= 550 end) |> length() == 1
      assert timings |> Enum.filter(fn {t, _} -> t < 250 end) |> length() == 7

      # The server answers again: once retry_after has passed, the next probe puts it back.
      command(port, "pass")
      assert back?(store, key, 30)
      assert {:ok, "v"} = Store.get(store, key)
    end
  end
end
