defmodule Larder.Cache.Owner do
  @moduledoc """
  Owns a cache's coalescing tables: `flights` (key -> the process computing it on this node) and `waiters` (key ->
  the processes waiting for it). Both are public so callers touch them directly; if this process dies they go
  with it, callers carry on uncoalesced (a miss runs the fallback) and the supervisor restarts it with new tables.
  """

  use GenServer

  def start_link(opts),
    do: GenServer.start_link(__MODULE__, opts, name: Keyword.fetch!(opts, :owner_name))

  @impl true
  def init(opts) do
    :ets.new(Keyword.fetch!(opts, :flights), [
      :set,
      :public,
      :named_table,
      write_concurrency: true
    ])

    :ets.new(Keyword.fetch!(opts, :waiters), [
      :duplicate_bag,
      :public,
      :named_table,
      write_concurrency: true
    ])

    {:ok, opts}
  end
end
