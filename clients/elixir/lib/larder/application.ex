defmodule Larder.Application do
  @moduledoc """
  The library's own processes, shared by every store a node opens: the connection pools of remote stores (one
  per server, started on first use under a DynamicSupervisor) and the health table (failure counts and ejections,
  spec/STORES.md §1), and the port to zstd and Brotli (`Larder.Codecs.Native`), so an application only adds `Larder.Cache` to its own tree.
  """

  use Application

  @impl true
  def start(_type, _args) do
    children = [
      {Registry, keys: :unique, name: Larder.Pools},
      {DynamicSupervisor, name: Larder.PoolSupervisor, strategy: :one_for_one},
      Larder.Stores.Health,
      Larder.Codecs.Native
    ]

    Supervisor.start_link(children, strategy: :one_for_one, name: Larder.Supervisor)
  end
end
