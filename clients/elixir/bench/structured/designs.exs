# The post's design (source document 004, "LinkCache.Cache" as printed): a GenServer owning a private ETS table of
# terms, every get and set a GenServer.call. bench/post_004.exs has the same; this one also exposes get/set for
# values that are not fetched.
defmodule Bench.Post do
  use GenServer

  def start_link, do: GenServer.start_link(__MODULE__, :link_cache_table, name: __MODULE__)

  def fetch(slug, default_value_function) do
    case GenServer.call(__MODULE__, {:get, slug}) do
      [] -> set(slug, default_value_function.())
      [{_slug, result}] -> result
    end
  end

  def get(slug) do
    case GenServer.call(__MODULE__, {:get, slug}) do
      [] -> nil
      [{_slug, result}] -> result
    end
  end

  def set(slug, value), do: GenServer.call(__MODULE__, {:set, slug, value})

  @impl true
  def init(table), do: {:ok, :ets.new(table, [:set, :private])}

  @impl true
  def handle_call({:get, slug}, _from, t), do: {:reply, :ets.lookup(t, slug), t}

  def handle_call({:set, slug, value}, _from, t),
    do: {:reply, :ets.insert(t, {slug, value}) && value, t}
end
