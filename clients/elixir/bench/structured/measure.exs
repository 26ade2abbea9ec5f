# How bench/structured.exs times things and reports them: wall clock, the VM's CPU time and the reductions of the
# caller and the store's owner per operation; the table with medians, min-max and larder's ratios; bench/report.py's
# raw JSON lines.
defmodule Bench.Measure do
  @metrics [
    %{"name" => "ops", "label" => "ops/s", "better" => "higher"},
    %{"name" => "cpu_us", "label" => "CPU µs/op", "better" => "lower"},
    %{"name" => "red", "label" => "reductions/op", "better" => "lower"}
  ]

  defp reductions(nil), do: 0

  defp reductions(pid) do
    case Process.info(pid, :reductions) do
      {:reductions, r} -> r
      nil -> 0
    end
  end

  defp cpu_ms, do: elem(:erlang.statistics(:runtime), 0)

  @doc """
  `fun.(i)` for i in 1..n, in chunks of `chunk` each run by a fresh process (a request's process: a caller's heap does
  not carry over), one after the other. `owner`: the store's process, whose reductions count too.
  """
  def chunked(n, chunk, owner, fun) do
    o0 = reductions(owner)
    c0 = cpu_ms()
    t0 = System.monotonic_time(:microsecond)

    red =
      1..n
      |> Enum.chunk_every(chunk)
      |> Enum.map(fn range ->
        Task.async(fn ->
          try do
            Enum.each(range, fun)
            {:ok, reductions(self())}
          catch
            kind, reason -> {:failed, kind, reason}
          end
        end)
        |> Task.await(:infinity)
        |> case do
          {:ok, r} -> r
          {:failed, kind, reason} -> :erlang.raise(kind, reason, [])
        end
      end)
      |> Enum.sum()

    us = System.monotonic_time(:microsecond) - t0
    cpu = (cpu_ms() - c0) * 1000

    %{ops: n / (us / 1.0e6), cpu_us: cpu / n, red: (red + reductions(owner) - o0) / n}
  end

  @doc """
  Put then get of each value by each subject, `ops` times a round, subjects' order rotating per round; each get is
  checked once to give back the value. Subjects: `{name, owner_pid | nil, put.(key, value), get.(key)}`.
  """
  def values(rows, rounds, ops, shapes, subjects, where) do
    for round <- 1..rounds, {shape, value} <- shapes, reduce: rows do
      rows ->
        k = rem(round - 1, length(subjects))
        order = Enum.drop(subjects, k) ++ Enum.take(subjects, k)

        Enum.reduce(order, rows, fn {name, owner, put, get}, rows ->
          slug = String.replace(shape, " ", "-")
          key = fn i -> "#{slug}:#{rem(i, 16)}" end

          try do
            p = chunked(ops, ops, owner, fn i -> :ok = ok(put.(key.(i), value)) end)

            unless get.(key.(1)) == value,
              do: raise("#{name} on #{where} did not give back #{shape}")

            g = chunked(ops, ops, owner, fn i -> get.(key.(i)) end)

            IO.puts(
              "  round #{round} #{shape} @#{where} #{name}: put #{round(p.ops)}/s, get #{round(g.ops)}/s"
            )

            [
              Map.merge(g, %{case: "#{shape} get @#{where}", subject: name, round: round}),
              Map.merge(p, %{case: "#{shape} put @#{where}", subject: name, round: round}) | rows
            ]
          catch
            # A store that failed an operation (a timeout on a loaded machine): this round has no figure for it.
            kind, reason ->
              IO.puts(
                "  round #{round} #{shape} @#{where} #{name}: failed, not counted (#{inspect({kind, reason}) |> String.slice(0, 200)})"
              )

              rows
          end
        end)
    end
  end

  defp ok(:ok), do: :ok
  defp ok(true), do: :ok
  defp ok(other) when is_map(other) or is_list(other) or is_binary(other), do: :ok
  defp ok(other), do: raise("put answered #{inspect(other)}")

  defp median(xs) do
    s = Enum.sort(xs)
    n = length(s)

    if rem(n, 2) == 1,
      do: Enum.at(s, div(n, 2)),
      else: (Enum.at(s, div(n, 2) - 1) + Enum.at(s, div(n, 2))) / 2
  end

  defp fmt(x) when x >= 1000, do: x |> round() |> Integer.to_string()
  defp fmt(x) when x >= 10, do: :erlang.float_to_binary(x / 1, decimals: 1)
  defp fmt(x), do: :erlang.float_to_binary(x / 1, decimals: 2)

  @doc "The table: per case and subject, medians (min-max) of each metric; larder's ratio to each peer in ops/s."
  def print(rows) do
    IO.puts("")

    IO.puts(
      "| case | subject | rounds | ops/s median (min-max) | CPU µs/op | reductions/op | larder ops/s ÷ this |"
    )

    IO.puts("|---|---|---|---|---|---|---|")

    rows
    |> Enum.group_by(& &1.case)
    |> Enum.sort_by(fn {c, _} -> Enum.find_index(rows, &(&1.case == c)) end)
    |> Enum.each(fn {c, rs} ->
      by = Enum.group_by(rs, & &1.subject)
      larder = by["larder"] && median(Enum.map(by["larder"], & &1.ops))

      Enum.each(Enum.uniq(Enum.map(rs, & &1.subject)), fn s ->
        xs = by[s]
        o = Enum.map(xs, & &1.ops)
        m = median(o)

        ratio =
          if s != "larder" and larder,
            do: "**#{:erlang.float_to_binary(larder / m, decimals: 2)}**",
            else: ""

        IO.puts(
          "| #{c} | #{s} | #{length(xs)} | #{fmt(m)} (#{fmt(Enum.min(o))}-#{fmt(Enum.max(o))}) | " <>
            "#{fmt(median(Enum.map(xs, & &1.cpu_us)))} | #{fmt(median(Enum.map(xs, & &1.red)))} | #{ratio} |"
        )
      end)
    end)
  end

  @doc "Appends bench/report.py's raw format: one meta line, then one line per case, subject and round."
  def write_raw(file, rows, command, started) do
    # One target per case and peer measured in it: larder at least as fast (ops/s) as each.
    targets =
      rows
      |> Enum.reject(&(&1.subject == "larder"))
      |> Enum.map(&{&1.case, &1.subject})
      |> Enum.uniq()
      |> Enum.map(fn {c, p} -> %{"case" => c, "vs" => p, "metric" => "ops", "ratio" => 1.0} end)

    meta = %{
      "meta" => true,
      "bench" => "elixir",
      "title" =>
        "Elixir: Larder.Cache against the post's GenServer+ETS design, ETS of term_to_binary, and term_to_binary/jiffy on memcached and Redis",
      "command" => command,
      "setup" =>
        "#{System.schedulers_online()} schedulers, OTP #{System.otp_release()}, Elixir #{System.version()}",
      "date" => DateTime.to_iso8601(started),
      "subject" => "larder",
      "metrics" => @metrics,
      "targets" => targets
    }

    lines =
      [
        meta
        | for(
            r <- rows,
            do: %{
              "bench" => "elixir",
              "case" => r.case,
              "subject" => r.subject,
              "round" => r.round,
              "ops" => r.ops,
              "cpu_us" => r.cpu_us,
              "red" => r.red
            }
          )
      ]
      |> Enum.map(&[Larder.JSON.encode!(&1), "\n"])

    File.write!(file, lines, [:append])
  end
end
