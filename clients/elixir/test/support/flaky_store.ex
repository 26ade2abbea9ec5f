defmodule Larder.TestFlakyStore do
  @moduledoc """
  A shared store for the cache's outage tests (spec/STORES.md §3, "When the store fails") that fails on demand: an
  ETS table of values and a mode, `:up` (answers), `:down` (every operation fails as a server that cannot be
  reached does, kind `:unavailable`) or `{:refuse, kind}` (writes are refused with that kind, as `:too_large` or
  `:invalid_key` are: not failures of the store). It counts the calls it is given.
  """

  @behaviour Larder.Store

  alias Larder.{Store, StoreError}

  @doc "A new store, up and empty: its handle (backend \"flaky\", so the cache treats it as shared)."
  def new do
    table = :ets.new(:flaky_store, [:set, :public, read_concurrency: true])
    :ets.insert(table, [{:mode, :up}, {:calls, 0}])
    %Store{module: __MODULE__, ref: table, backend: "flaky"}
  end

  @doc "Sets the mode: `:up`, `:down` or `{:refuse, kind}`."
  def mode(%Store{ref: t}, mode), do: :ets.insert(t, {:mode, mode})

  @doc "What the store holds under a stored key (no expiry check), bypassing the mode."
  def raw(%Store{ref: t}, key) do
    case :ets.lookup(t, {:k, key}) do
      [{_, v, _}] -> {:ok, v}
      [] -> :miss
    end
  end

  @doc "Calls made to the store so far."
  def calls(%Store{ref: t}), do: :ets.lookup_element(t, :calls, 2)

  defp answer(t, fun) do
    :ets.update_counter(t, :calls, 1)

    case :ets.lookup_element(t, :mode, 2) do
      :down -> {:error, StoreError.new("flaky", :unavailable, "down (test)", "flaky:1")}
      _ -> fun.()
    end
  end

  defp refused(t) do
    case :ets.lookup_element(t, :mode, 2) do
      {:refuse, kind} -> {:error, StoreError.new("flaky", kind, "refused (test)")}
      _ -> nil
    end
  end

  @impl true
  def get(t, key) do
    answer(t, fn ->
      now = Store.now_ms()

      case :ets.lookup(t, {:k, key}) do
        [{_, v, exp}] when exp == nil or exp > now -> {:ok, v}
        _ -> :miss
      end
    end)
  end

  @impl true
  def get_many(t, keys) do
    answer(t, fn ->
      {:ok, for(k <- keys, {:ok, v} <- [get(t, k)], into: %{}, do: {k, v})}
    end)
  end

  @impl true
  def set(t, key, value, ttl) do
    answer(t, fn ->
      refused(t) ||
        (:ets.insert(t, {{:k, key}, value, Store.expiry(value, ttl, Store.now_ms())}) && :ok)
    end)
  end

  @impl true
  def add(t, key, value, ttl) do
    answer(t, fn ->
      refused(t) ||
        {:ok, :ets.insert_new(t, {{:k, key}, value, Store.expiry(value, ttl, Store.now_ms())})}
    end)
  end

  @impl true
  def delete(t, key), do: answer(t, fn -> {:ok, :ets.take(t, {:k, key}) != []} end)

  @impl true
  def delete_if(t, key, expected) do
    answer(t, fn ->
      {:ok, :ets.select_delete(t, [{{{:k, key}, expected, :_}, [], [true]}]) == 1}
    end)
  end

  @impl true
  def incr(_t, _key, _delta, _ttl, _create),
    do: {:error, StoreError.new("flaky", :unsupported, "no counters here")}

  @impl true
  def purge_tag(t, _tag), do: answer(t, fn -> {:ok, 0} end)

  @impl true
  def purge_prefix(t, prefix) do
    answer(t, fn ->
      keys = for {{:k, k}, _, _} <- :ets.tab2list(t), String.starts_with?(k, prefix), do: k
      Enum.each(keys, &:ets.delete(t, {:k, &1}))
      {:ok, length(keys)}
    end)
  end

  @impl true
  def clear(t), do: answer(t, fn -> :ets.match_delete(t, {{:k, :_}, :_, :_}) && :ok end)
end
