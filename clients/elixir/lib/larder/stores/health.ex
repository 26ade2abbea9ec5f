defmodule Larder.Stores.Health do
  @moduledoc """
  Failure and recovery of remote servers (spec/STORES.md §1, §4.3), in one public ETS table every caller updates
  directly: `failures` consecutive failures eject a server for `retry_after`; then one request may try it again
  (probation: a success puts it back, one failure ejects it again). Rows are keyed by the store's identity and the
  server's index, so two stores on the same servers keep separate counts.
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

  @doc "Whether server `i` of store `id` is ejected at `now` (false once `retry_after` has passed: probation)."
  def ejected?(id, i, now) do
    case :ets.lookup(@table, {id, i}) do
      [{_, _, until, _}] when is_integer(until) -> now < until
      _ -> false
    end
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
