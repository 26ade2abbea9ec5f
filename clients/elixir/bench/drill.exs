# The fetch drill (issue 33; bench/drills.py runs it against memcached or Redis behind larder-faults): `workers`
# Elixir processes call Larder.Cache.fetch/4 on random keys drill:0..keys-1 for `seconds`, the loader standing for
# the app (it counts one load, sleeps `loader-ms` and returns a query result of about 1 KiB: a map holding a list of
# 24 small maps, j in 0..23 as in the Rust drill), and one JSON line per interval on standard output says what they
# saw: calls, errors, loads and latency. The harness freezes, kills, slows or empties the store meanwhile. Run from
# clients/elixir, compiled first (a first compile prints to standard output), with the environment bin/conformance
# uses:
#
#   export MIX_HOME=~/.cache/larder/mix HEX_HOME=~/.cache/larder/hex MIX_ENV=dev
#   mix compile >&2 && mix run bench/drill.exs --store URL --seconds S [--workers 16] [--keys 50] \
#     [--ttl-ms 60000] [--loader-ms 20] [--interval-ms 250]
#
# (`mix run bench/drill.exs -- --store URL …` works too.) Without mix, on the compiled build:
#
#   elixir -pa _build/dev/lib/larder/ebin bench/drill.exs --store URL --seconds S
#
# The cache is Larder.Cache with default options (the outage memory on, 16M), no namespace. `seconds` and `t_ms`
# count from the start of the VM, so the time mix takes to start is part of the run and the program ends on time
# for a harness that started it: at `seconds` it prints the last interval (shorter if `seconds` is not a multiple
# of the interval) and the `done` line, and halts the VM, abandoning any fetch still waiting on a frozen store.
# The first line comes once the VM is up (1-4 s under mix on a busy 2-core machine); a reporter the machine starved
# prints one longer interval rather than several late ones. Logs go to standard error, with one last line there of
# Larder.Cache.stats/1 (outage_kept, outage_served, store_errors…).

defmodule Drill do
  @cache Drill.Cache

  @usage """
  usage: mix run bench/drill.exs --store URL --seconds S [--workers 16] [--keys 50] [--ttl-ms 60000]
                                 [--loader-ms 20] [--interval-ms 250]

  Loads Larder.Cache (default options: the outage memory on) over the store URL with `workers` processes for S
  seconds (counted from the start of the VM), each calling fetch("drill:<n>", ttl: ttl-ms) on n uniform in
  [0, keys); the loader counts one load, sleeps loader-ms and returns a ~1 KiB query result.

    --store URL          the store (memcached://host:port, redis://host:port, …), as given; required
    --seconds S          how long the callers run (a positive number); required
    --workers N          concurrent callers (processes), default 16
    --keys N             distinct keys, default 50
    --ttl-ms MS          the fetch's ttl, default 60000
    --loader-ms MS       how long a load takes, default 20
    --interval-ms MS     one line per interval, default 250

  Standard output: one JSON line per interval, {"t_ms", "calls", "errors", "loads", "p50_ms", "p99_ms", "max_ms"}
  (calls and latencies of the fetches completed in the interval, loads started in it, t_ms at its end), then
  {"done": true, "calls", "errors", "loads"}. Exit 0 after a run (errors or not), 2 on bad arguments.
  """

  @switches [
    store: :string,
    seconds: :string,
    workers: :integer,
    keys: :integer,
    ttl_ms: :integer,
    loader_ms: :integer,
    interval_ms: :integer,
    help: :boolean
  ]

  def main(argv) do
    # Logger's console writes to standard output by default; standard output is the report's alone.
    Logger.configure_backend(:console, device: :standard_error)

    case parse(argv) do
      :help ->
        IO.write(@usage)
        System.halt(0)

      {:error, why} ->
        usage_error(why)

      {:ok, o} ->
        run(o)
    end
  end

  defp usage_error(why) do
    IO.write(:stderr, "drill: #{why}\n" <> @usage)
    System.halt(2)
  end

  # ------------------------------------------------------------------------------------------ arguments

  defp parse(argv) do
    # `mix run FILE -- args` hands the script the `--` too.
    argv = with ["--" | rest] <- argv, do: rest

    case OptionParser.parse(argv, strict: @switches, aliases: [h: :help]) do
      {opts, [], []} ->
        if opts[:help], do: :help, else: check(opts)

      {_, [extra | _], _} ->
        {:error, "unexpected argument #{inspect(extra)}"}

      {_, _, [{flag, nil} | _]} ->
        {:error, "unknown option #{flag}"}

      {_, _, [{flag, value} | _]} ->
        {:error, "#{flag}: #{inspect(value)} is not a whole number"}
    end
  end

  defp check(opts) do
    o = %{
      store: opts[:store],
      seconds: seconds(opts[:seconds]),
      workers: Keyword.get(opts, :workers, 16),
      keys: Keyword.get(opts, :keys, 50),
      ttl_ms: Keyword.get(opts, :ttl_ms, 60_000),
      loader_ms: Keyword.get(opts, :loader_ms, 20),
      interval_ms: Keyword.get(opts, :interval_ms, 250)
    }

    cond do
      o.store in [nil, ""] ->
        {:error, "--store is required"}

      o.seconds == nil ->
        {:error, "--seconds is required (a positive number)"}

      o.seconds == :bad ->
        {:error, "--seconds: #{inspect(opts[:seconds])} is not a positive number"}

      o.workers < 1 ->
        {:error, "--workers must be at least 1"}

      o.keys < 1 ->
        {:error, "--keys must be at least 1"}

      o.ttl_ms < 1 ->
        {:error, "--ttl-ms must be at least 1"}

      o.loader_ms < 0 ->
        {:error, "--loader-ms must not be negative"}

      o.interval_ms < 10 ->
        {:error, "--interval-ms must be at least 10"}

      true ->
        {:ok, o}
    end
  end

  defp seconds(nil), do: nil

  defp seconds(text) do
    case Float.parse(text) do
      {s, ""} when s > 0 -> s
      _ -> :bad
    end
  end

  # ------------------------------------------------------------------------------------------ the run

  defp run(o) do
    {:ok, _} = Application.ensure_all_started(:larder)

    # The cache's supervisor is linked to this process: a store URL it cannot open is an answer, not a crash.
    Process.flag(:trap_exit, true)

    case Larder.Cache.start_link(name: @cache, store: o.store) do
      {:ok, _} -> :ok
      {:error, reason} -> usage_error("--store #{inspect(o.store)}: #{reason_text(reason)}")
    end

    start = :erlang.system_info(:start_time)
    deadline = start + ms_native(round(o.seconds * 1000))
    loads = :counters.new(1, [:write_concurrency])
    me = self()

    for _ <- 1..o.workers do
      spawn(fn -> work(o, me, deadline, loads) end)
    end

    s = %{
      start: start,
      deadline: deadline,
      interval: ms_native(o.interval_ms),
      next: nil,
      loads: loads,
      latencies: [],
      errors: 0,
      total: {0, 0, 0}
    }

    report(%{s | next: next_tick(s, System.monotonic_time())})
  end

  # The first tick after `now` on the interval's grid from the start, or the deadline. A reporter that fell behind
  # (a starved VM) skips the ticks it missed: its next line covers the longer interval, and says so in t_ms.
  defp next_tick(s, now),
    do: min(s.start + (div(now - s.start, s.interval) + 1) * s.interval, s.deadline)

  defp reason_text({{:badmatch, {:error, why}}, _stack}) when is_binary(why), do: why
  defp reason_text({{%{__exception__: true} = e, _stack}, _child}), do: Exception.message(e)
  defp reason_text({%{__exception__: true} = e, _stack}), do: Exception.message(e)
  defp reason_text(other), do: inspect(other)

  defp ms_native(ms), do: System.convert_time_unit(ms, :millisecond, :native)

  defp work(o, reporter, deadline, loads) do
    if System.monotonic_time() < deadline do
      n = :rand.uniform(o.keys) - 1
      called = System.monotonic_time()

      ok =
        try do
          Larder.Cache.fetch(@cache, "drill:#{n}", fn -> load(n, o.loader_ms, loads) end,
            ttl: o.ttl_ms
          )

          true
        rescue
          _ -> false
        catch
          _, _ -> false
        end

      done = System.monotonic_time()
      send(reporter, {:call, done, done - called, ok})
      work(o, reporter, deadline, loads)
    end
  end

  # The app: one load, loader-ms of work, a query result (string keys, as MessagePack gives them back).
  defp load(n, loader_ms, loads) do
    :counters.add(loads, 1, 1)
    Process.sleep(loader_ms)

    %{
      "id" => n,
      "rows" => for(j <- 0..23, do: %{"i" => j, "name" => "row #{j}", "score" => j * 1.5})
    }
  end

  # The reporter (this process): gathers the callers' completions until the next tick, prints the interval, and at
  # the deadline prints the last one and the totals and halts, whatever the callers are still waiting on.
  defp report(s) do
    now = System.monotonic_time()

    if now >= s.next do
      s = s |> drain(now) |> interval_line(now)

      if now >= s.deadline do
        {calls, errors, loads} = s.total

        IO.puts(~s({"done":true,"calls":#{calls},"errors":#{errors},"loads":#{loads}}))

        IO.puts(:stderr, "drill: cache stats #{inspect(Larder.Cache.stats(@cache))}")
        System.halt(0)
      else
        report(%{s | next: next_tick(s, now)})
      end
    else
      wait = System.convert_time_unit(s.next - now, :native, :millisecond) + 1

      receive do
        {:call, _done, took, ok} -> report(count(s, took, ok))
        _other -> report(s)
      after
        wait -> report(s)
      end
    end
  end

  defp count(s, took, true), do: %{s | latencies: [took | s.latencies]}
  defp count(s, took, false), do: %{s | latencies: [took | s.latencies], errors: s.errors + 1}

  # The calls completed by `now` still in the mailbox (a busy reporter reads behind the callers) are this interval's.
  defp drain(s, now) do
    receive do
      {:call, done, took, ok} when done <= now -> s |> count(took, ok) |> drain(now)
    after
      0 -> s
    end
  end

  defp interval_line(s, now) do
    loads = :counters.get(s.loads, 1)
    :counters.sub(s.loads, 1, loads)
    sorted = s.latencies |> Enum.sort() |> List.to_tuple()
    calls = tuple_size(sorted)
    {all_calls, all_errors, all_loads} = s.total

    IO.puts(
      ~s({"t_ms":#{System.convert_time_unit(now - s.start, :native, :millisecond)},) <>
        ~s("calls":#{calls},"errors":#{s.errors},"loads":#{loads},) <>
        ~s("p50_ms":#{ms(rank(sorted, 0.5))},"p99_ms":#{ms(rank(sorted, 0.99))},) <>
        ~s("max_ms":#{ms(rank(sorted, 1.0))}})
    )

    %{
      s
      | latencies: [],
        errors: 0,
        total: {all_calls + calls, all_errors + s.errors, all_loads + loads}
    }
  end

  # Nearest rank: the smallest latency with at least q of the calls at or below it.
  defp rank({}, _q), do: 0
  defp rank(sorted, q), do: elem(sorted, max(ceil(q * tuple_size(sorted)) - 1, 0))

  defp ms(native) do
    us = System.convert_time_unit(native, :native, :microsecond)
    :erlang.float_to_binary(us / 1000, decimals: 3)
  end
end

Drill.main(System.argv())
