defmodule Larder.Stores.Memory do
  @moduledoc """
  `memory://?capacity=256M&max_entries=N`: the node's own store (spec/STORES.md §8), an ETS table owned by a
  GenServer that an application puts under its supervisor (the post's design, 004, bounded).

  Reads go straight to ETS in the caller's process, without a GenServer call; writes go through the owner, which
  keeps the byte total under `capacity` (evicting the oldest-written entries first) and the count under
  `max_entries`. A janitor sweeps expired entries every second; reads never return an expired one anyway. If the
  owner dies its table goes with it: reads and writes answer `:unavailable` (the cache reads a miss) until the
  supervisor has restarted it, empty. A value larger than a sixteenth of `capacity` is refused (`:too_large`).
  """

  use GenServer
  @behaviour Larder.Store

  alias Larder.{Store, StoreError}

  @backend "memory"
  @default_capacity 256 * 1024 * 1024
  # What ETS and the order table spend per entry beyond key and value (measured: see docs in README).
  @overhead 120

  def child_spec(opts) do
    %{id: Keyword.get(opts, :name, __MODULE__), start: {__MODULE__, :start_link, [opts]}}
  end

  @doc "Starts the owner. Options: `name` (an atom, required: it names the table too), `capacity`, `max_entries`."
  def start_link(opts) do
    name = Keyword.fetch!(opts, :name)
    GenServer.start_link(__MODULE__, opts, name: name)
  end

  @doc "The store handle for the owner registered as `name`."
  def handle(name), do: %Store{module: __MODULE__, ref: name, backend: @backend}

  @doc "Options from a `memory://` URL (spec/STORES.md §8)."
  def url_options(url) do
    {capacity, url} = Store.URL.take_size(url, "capacity", @default_capacity)
    {max_entries, url} = Store.URL.take_integer(url, "max_entries", nil)
    Store.URL.finish(url)
    [capacity: capacity, max_entries: max_entries]
  end

  # ------------------------------------------------------------------------------------ reads (caller)

  @impl Larder.Store
  def get(name, key) do
    with :ok <- StoreError.check_key(@backend, key) do
      lookup(name, key, nil)
    end
  end

  # `now` (ms) is read only when the row has an expiry: most rows have none, and the clock is a call of its own.
  defp lookup(name, key, now) do
    case :ets.lookup(name, key) do
      [{_, value, nil, _, _}] ->
        {:ok, value}

      [{_, value, expiry, _, _}] ->
        if expiry > (now || Store.now_ms()), do: {:ok, value}, else: :miss

      _ ->
        :miss
    end
  rescue
    ArgumentError -> unavailable()
  end

  @impl Larder.Store
  def get_many(name, keys) do
    with :ok <- StoreError.check_keys(@backend, keys) do
      now = Store.now_ms()

      Enum.reduce_while(keys, {:ok, %{}}, fn k, {:ok, acc} ->
        case lookup(name, k, now) do
          {:ok, v} -> {:cont, {:ok, Map.put(acc, k, v)}}
          :miss -> {:cont, {:ok, acc}}
          e -> {:halt, e}
        end
      end)
    end
  end

  defp unavailable,
    do:
      {:error,
       StoreError.new(
         @backend,
         :unavailable,
         "the memory store's owner is not running (restarting?)"
       )}

  # ----------------------------------------------------------------------------------- writes (owner)

  @impl Larder.Store
  def set(name, key, value, ttl), do: write(name, key, {:set, key, value, ttl})
  @impl Larder.Store
  def add(name, key, value, ttl), do: write(name, key, {:add, key, value, ttl})
  @impl Larder.Store
  def delete(name, key), do: write(name, key, {:delete, key})
  @impl Larder.Store
  def delete_if(name, key, expected), do: write(name, key, {:delete_if, key, expected})
  @impl Larder.Store
  def incr(name, key, delta, ttl, create), do: write(name, key, {:incr, key, delta, ttl, create})

  @impl Larder.Store
  def purge_tag(name, tag) when is_binary(tag), do: call(name, {:purge_tag, tag})

  @impl Larder.Store
  def purge_prefix(name, prefix) do
    with :ok <- StoreError.check_prefix(@backend, prefix), do: call(name, {:purge_prefix, prefix})
  end

  @impl Larder.Store
  def clear(name), do: call(name, :clear)

  @doc "`%{entries, bytes, capacity, evictions, expired}`."
  def stats(name), do: call(name, :stats)

  defp write(name, key, request) do
    with :ok <- StoreError.check_key(@backend, key), do: call(name, request)
  end

  defp call(name, request) do
    GenServer.call(name, request, 10_000)
  catch
    :exit, _ -> unavailable()
  end

  # ------------------------------------------------------------------------------------------ owner

  @impl GenServer
  def init(opts) do
    name = Keyword.fetch!(opts, :name)
    # key -> {key, value, expiry ms | nil, seq, size}; readers use it directly.
    :ets.new(name, [:set, :public, :named_table, read_concurrency: true])
    # seq -> key, oldest first: what eviction takes.
    order = :ets.new(:larder_memory_order, [:ordered_set, :private])

    # {expiry, seq} -> key, soonest first: what the janitor takes, without scanning the whole table.
    expiries = :ets.new(:larder_memory_expiries, [:ordered_set, :private])
    :timer.send_interval(Keyword.get(opts, :janitor_ms, 1000), :janitor)

    {:ok,
     %{
       table: name,
       order: order,
       expiries: expiries,
       capacity: Keyword.get(opts, :capacity) || @default_capacity,
       max_entries: Keyword.get(opts, :max_entries),
       bytes: 0,
       seq: 0,
       evictions: 0,
       expired: 0
     }}
  end

  @impl GenServer
  def handle_call({:set, key, value, ttl}, _from, s) do
    case put(s, key, value, ttl) do
      {:ok, s} -> {:reply, :ok, s}
      {:error, _} = e -> {:reply, e, s}
    end
  end

  def handle_call({:add, key, value, ttl}, _from, s) do
    if live_key?(s, key), do: {:reply, {:ok, false}, s}, else: add_new(s, key, value, ttl)
  end

  def handle_call({:delete, key}, _from, s),
    do: {:reply, {:ok, live_key?(s, key)}, remove(s, key)}

  def handle_call({:delete_if, key, expected}, _from, s) do
    case :ets.lookup(s.table, key) do
      [{_, ^expected, exp, _, _}] ->
        if live?(exp, Store.now_ms()),
          do: {:reply, {:ok, true}, remove(s, key)},
          else: {:reply, {:ok, false}, s}

      _ ->
        {:reply, {:ok, false}, s}
    end
  end

  def handle_call({:incr, key, delta, ttl, create}, _from, s) do
    now = Store.now_ms()

    case :ets.lookup(s.table, key) do
      [{_, value, exp, _, _}] when exp == nil or exp > now ->
        case Store.parse_counter(value) do
          nil ->
            {:reply,
             {:error,
              StoreError.new(@backend, :not_a_counter, "#{inspect(key)} does not hold a counter")},
             s}

          n ->
            new = Store.saturate(n + delta)
            # A counter keeps the expiry it was created with.
            :ets.update_element(s.table, key, {2, Integer.to_string(new)})
            {:reply, {:ok, new}, s}
        end

      _ when create ->
        new = Store.saturate(delta)

        case put(s, key, Integer.to_string(new), ttl) do
          {:ok, s} -> {:reply, {:ok, new}, s}
          e -> {:reply, e, s}
        end

      _ ->
        {:reply, :missing, s}
    end
  end

  def handle_call({:purge_tag, tag}, _from, s) do
    keys = for {k, v, _, _, _} <- :ets.tab2list(s.table), tag in Store.entry_tags(v), do: k
    {:reply, {:ok, length(keys)}, Enum.reduce(keys, s, &remove(&2, &1))}
  end

  def handle_call({:purge_prefix, prefix}, _from, s) do
    keys = for {k, _, _, _, _} <- :ets.tab2list(s.table), String.starts_with?(k, prefix), do: k
    {:reply, {:ok, length(keys)}, Enum.reduce(keys, s, &remove(&2, &1))}
  end

  def handle_call(:clear, _from, s) do
    :ets.delete_all_objects(s.table)
    :ets.delete_all_objects(s.order)
    :ets.delete_all_objects(s.expiries)
    {:reply, :ok, %{s | bytes: 0}}
  end

  def handle_call(:stats, _from, s) do
    {:reply,
     %{
       entries: :ets.info(s.table, :size),
       bytes: s.bytes,
       capacity: s.capacity,
       evictions: s.evictions,
       expired: s.expired
     }, s}
  end

  @impl GenServer
  def handle_info(:janitor, s) do
    {:noreply, sweep(s, Store.now_ms())}
  end

  # The expired entries, soonest first, from the expiry index: the cost is the number swept, not the table's size
  # (a scan of the whole table every second held the owner, and every write waiting on it, for a tenth of a second
  # at a million entries).
  defp sweep(s, now) do
    case :ets.first(s.expiries) do
      {exp, _} = slot when exp <= now ->
        [{_, key}] = :ets.lookup(s.expiries, slot)
        :ets.delete(s.expiries, slot)
        sweep(%{remove(s, key) | expired: s.expired + 1}, now)

      _ ->
        s
    end
  end

  defp add_new(s, key, value, ttl) do
    case put(s, key, value, ttl) do
      {:ok, s} -> {:reply, {:ok, :ets.member(s.table, key)}, s}
      e -> {:reply, e, s}
    end
  end

  defp live_key?(s, key) do
    case :ets.lookup(s.table, key) do
      [{_, _, exp, _, _}] -> live?(exp, Store.now_ms())
      [] -> false
    end
  end

  defp live?(nil, _), do: true
  defp live?(exp, now), do: exp > now

  defp put(s, key, value, ttl) do
    # The clock only when something expires (a TTL, or an entry's own expiry below).
    now = if ttl, do: Store.now_ms()
    size = byte_size(key) + byte_size(value) + @overhead
    limit = div(s.capacity, 16)

    cond do
      size > limit ->
        {:error,
         StoreError.new(
           @backend,
           :too_large,
           "#{inspect(key)}: #{byte_size(value)} bytes; the limit is #{limit} (a sixteenth of capacity)"
         )}

      true ->
        exp = Store.expiry(value, ttl, now)

        if exp != nil and exp <= (now || Store.now_ms()) do
          # Already past its expiry: stores nothing (and the older value is gone).
          {:ok, remove(s, key)}
        else
          seq = s.seq + 1
          row = {key, value, exp, seq, size}

          # A new key is one insert_new; a key written before is taken out (its bytes, order and expiry) first.
          s =
            if :ets.insert_new(s.table, row) do
              s
            else
              s = remove(s, key)
              :ets.insert(s.table, row)
              s
            end

          :ets.insert(s.order, {seq, key})
          if exp, do: :ets.insert(s.expiries, {{exp, seq}, key})
          {:ok, evict(%{s | seq: seq, bytes: s.bytes + size})}
        end
    end
  end

  defp remove(s, key) do
    case :ets.take(s.table, key) do
      [{_, _, exp, seq, size}] ->
        :ets.delete(s.order, seq)
        if exp, do: :ets.delete(s.expiries, {exp, seq})
        %{s | bytes: s.bytes - size}

      [] ->
        s
    end
  end

  # Oldest-written first, until both bounds hold.
  defp evict(s) do
    over =
      s.bytes > s.capacity or (s.max_entries != nil and :ets.info(s.table, :size) > s.max_entries)

    case over && :ets.first(s.order) do
      false ->
        s

      :"$end_of_table" ->
        s

      seq ->
        [{_, key}] = :ets.lookup(s.order, seq)
        evict(%{remove(s, key) | evictions: s.evictions + 1})
    end
  end
end
