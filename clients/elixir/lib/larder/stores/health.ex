defmodule Larder.Stores.Health do
  @moduledoc """
  Failure and recovery of remote servers (spec/STORES.md §1, §4.3), in one public ETS table every caller updates
  directly: `failures` consecutive failures eject a server for `retry_after`; then one request at a time may try it
  again (probation: a success puts it back, one failure ejects it again, and while that probe is out every other
  request still finds the server ejected). Rows are keyed by the store's identity and the server's index, so two
  stores on the same servers keep separate counts.

  A row is `{{id, i}, failures, until, errors}`: `until` is nil for a server in service, else the time (ms) its
  ejection ends. The request that takes the probe moves `until` forward by `hold` (the store passes `retry_after`
  plus its `timeout`, so the window outlasts the probe) with a compare-and-swap (`:ets.select_replace/2`), so
  exactly one caller wins it and the others keep failing at once; the probe's answer (`success/2`, `failure/5`)
  then puts the server back or ejects it again. A probe that never reports (its caller died) only holds the server
  out for `hold`, then the next request probes.
  """

  use GenServer

  @table __MODULE__

  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  @impl true
  def init(_) do
    :ets.new(@table, [
      :set,
      :public,
      :named_table,
      read_concurrency: true,
      write_concurrency: true
    ])

    {:ok, nil}
  end

  @doc """
  Whether a request may go to server `i` of store `id` at `now`: `:up` (in service), `:probe` (its ejection is over
  and this caller took the one probe: its answer decides) or `:ejected` (still ejected, or another caller's probe
  is out: fail at once).
  """
  def admit(id, i, now, hold) do
    case state(id, i, now) do
      :up -> :up
      :ejected -> :ejected
      {:due, until} -> if claim(id, i, until, now + hold), do: :probe, else: :ejected
    end
  end

  @doc """
  The server's state without taking anything: `:up`, `:ejected`, or `{:due, until}` (its ejection ended at
  `until` and no probe is out; `claim/4` takes the probe).
  """
  def state(id, i, now) do
    case :ets.lookup(@table, {id, i}) do
      [{_, _, until, _}] when is_integer(until) ->
        if now < until, do: :ejected, else: {:due, until}

      _ ->
        :up
    end
  end

  @doc """
  Takes the probe of a server found `{:due, until}`: true for exactly one caller, which holds it (the server stays
  ejected for everyone else) until `probe_until` or its answer, whichever comes first.
  """
  def claim(id, i, until, probe_until), do: swap_until(id, i, until, probe_until)

  @doc "Gives back a probe taken with `claim/4` and not used (the request went to other servers)."
  def release(id, i, until, probe_until), do: swap_until(id, i, probe_until, until)

  defp swap_until(id, i, from, to) do
    key = {id, i}

    :ets.select_replace(@table, [
      {{key, :"$1", from, :"$2"}, [], [{{{:const, key}, :"$1", to, :"$2"}}]}
    ]) == 1
  end

  @doc "Counts a failure; answers `:ejected` when this one ejects the server."
  def failure(id, i, limit, retry_after, now) do
    {failures, was_ejected, errors} =
      case :ets.lookup(@table, {id, i}) do
        [{_, f, until, errors}] -> {f + 1, until != nil, errors + 1}
        [] -> {1, false, 1}
      end

    if failures >= limit or was_ejected do
      :ets.insert(@table, {{id, i}, 0, now + retry_after, errors})
      :ejected
    else
      :ets.insert(@table, {{id, i}, failures, nil, errors})
      :counted
    end
  end

  @doc "A good answer: the count is reset and an ejected server is back."
  def success(id, i) do
    case :ets.lookup(@table, {id, i}) do
      [{_, 0, nil, _}] -> :ok
      [{k, _, _, errors}] -> :ets.insert(@table, {k, 0, nil, errors})
      [] -> :ok
    end

    :ok
  end

  @doc "A request refused because the server is ejected counts in its error count."
  def refused(id, i) do
    :ets.update_counter(@table, {id, i}, {4, 1}, {{id, i}, 0, nil, 0})
    :ok
  end

  @doc "Errors counted for server `i` of store `id`."
  def errors(id, i) do
    case :ets.lookup(@table, {id, i}) do
      [{_, _, _, e}] -> e
      [] -> 0
    end
  end

  @doc "A cached value for store `id` (the ring of a set of live servers), computed once."
  def cached(id, key, fun) do
    case :ets.lookup(@table, {id, :cache, key}) do
      [{_, v}] ->
        v

      [] ->
        v = fun.()
        :ets.insert(@table, {{id, :cache, key}, v})
        v
    end
  end
end
