defmodule Larder.Cache do
  @moduledoc """
  What an application calls: `fetch(cache, key, fallback, ttl: …)` over any larder store, in the supervision tree.

      children = [{Larder.Cache, name: MyApp.Cache, store: "memory://?capacity=256M"}]
      Larder.Cache.fetch(MyApp.Cache, "link:" <> slug, fn -> Repo.get_by!(Link, slug: slug) |> Map.take([:url]) end,
        ttl: 60_000)

  Values are written as larder entries (MessagePack, LZ4 above 1 KiB), so the Rust front, Python and Ruby read
  what Elixir writes and the reverse. Keys are namespaced and made safe (FORMAT.md §5).

  `fetch` follows spec/STORES.md §3: the callers of one key on this node are coalesced (one runs the fallback,
  the rest wait for its result, or its exception); the leader takes the store's lock so that one process among
  all that share the store computes; a stale entry (within `stale:`) is served at once while one background task
  refreshes it. Store failures are absorbed (a failed read is a miss, a failed write is not written) and counted
  in `stats/1`. Killing any process of the cache's tree is survived: the supervisor restarts it, and callers in
  the meantime read misses, never crash.

  When the store fails (spec/STORES.md §3, "When the store fails"): a value whose write to the store fails (no
  connection, a timeout, a broken or malformed reply, a server refused at once while ejected) is kept in the
  cache's *outage memory*, a bounded `Larder.Stores.Memory` of its own, with the expiry the store would have given
  it; a read the store fails is answered from there; deletes and purges apply to it; the first good answer from
  the store once no failure has been seen for one second empties it (nothing is written back; with several
  servers, the others answer while one fails, and their answers must not drop what the failing one's keys need).
  Whether anything may be in it is one atomic flag, so a hit on a healthy store costs one `:atomics.get/2` more.

  Options of `start_link/1`: `name` (required), `store` (a URL or a `Larder.Store` handle; default
  `memory://`), `namespace`, `lock_ttl` (ms, 10 000), `max_size` (largest value decoded, 64 MiB),
  `compressor` (`:lz4`; `:none` on `memory://`, whose bytes never leave the node: spec/STORES.md §8),
  `outage_memory` (a size as store URLs write them, `"16M"`, or bytes; default `"16M"`; `0` turns it off; a cache
  on `memory://` has none, its store being memory already).
  """

  use Supervisor

  alias Larder.{Entry, Keys, Store, Stores}

  @stats [
    :hits,
    :misses,
    :stale_served,
    :loads,
    :coalesced_waits,
    :coalesced_across_processes,
    :store_errors,
    :corrupt_entries,
    :refresh_errors,
    :outage_kept,
    :outage_served
  ]
  # The store errors that are a *failure* of the store (spec/STORES.md §1, §3 rule 2): what the outage memory is for.
  # Not :invalid_key, :too_large, :not_a_counter, :unsupported, nor a server's error answer (:server).
  @failures [:timeout, :unavailable, :malformed]
  @default_outage_memory "16M"
  # How long the store must go without a failure before a good answer empties the outage memory (rule 4).
  @quiet_ms 1_000
  @poll_first 5
  @poll_most 50

  def start_link(opts) do
    name = Keyword.fetch!(opts, :name)
    Supervisor.start_link(__MODULE__, opts, name: name)
  end

  @impl true
  def init(opts) do
    name = Keyword.fetch!(opts, :name)
    {store, store_children} = store(name, Keyword.get(opts, :store, "memory://"))
    outage_bytes = outage_bytes(Keyword.get(opts, :outage_memory, @default_outage_memory))

    # A memory store is this node's alone: it fails only while its owner restarts, and has nothing to stand in for.
    outage = if outage_bytes > 0 and store.backend != "memory", do: :"#{name}.Outage"

    config = %{
      store: store,
      namespace: Keyword.get(opts, :namespace),
      lock_ttl: Keyword.get(opts, :lock_ttl, 10_000),
      max_size: Keyword.get(opts, :max_size, Larder.Compressors.default_max_size()),
      compressor:
        Keyword.get(opts, :compressor, if(store.backend == "memory", do: :none, else: :lz4)),
      # A memory store is this node's alone: its callers are already coalesced here, so no store lock is needed.
      shared: store.backend != "memory",
      flights: :"#{name}.Flights",
      waiters: :"#{name}.Waiters",
      tasks: :"#{name}.Tasks",
      stats: :counters.new(length(@stats), [:write_concurrency]),
      # The outage memory (nil when off); slot 1: whether it may hold anything, 1 from a store failure until a good
      # answer once no failure has been seen for @quiet_ms, which empties it; slot 2: the monotonic time (ms) of
      # the last failure (spec/STORES.md §3, rules 2 and 4).
      outage: outage && Stores.Memory.handle(outage),
      failing: :atomics.new(2, signed: true)
    }

    :persistent_term.put({__MODULE__, name}, config)

    outage_children =
      if outage, do: [{Stores.Memory, name: outage, capacity: outage_bytes}], else: []

    children =
      store_children ++
        outage_children ++
        [
          {Larder.Cache.Owner,
           owner_name: :"#{name}.Owner", flights: config.flights, waiters: config.waiters},
          {Task.Supervisor, name: config.tasks}
        ]

    Supervisor.init(children, strategy: :one_for_one)
  end

  defp outage_bytes(n) when is_integer(n) and n >= 0, do: n

  defp outage_bytes(text) when is_binary(text) do
    case Store.URL.parse_size(text) do
      {:ok, n} ->
        n

      :error ->
        raise ArgumentError, "outage_memory: #{inspect(text)} is not a size (0, 512K, 16M)"
    end
  end

  defp outage_bytes(other),
    do: raise(ArgumentError, "outage_memory: #{inspect(other)} is not a size (0, 512K, 16M)")

  defp store(_name, %Store{} = handle), do: {handle, []}

  defp store(name, url) when is_binary(url) do
    {:ok, parsed} = Store.URL.parse(url)

    case parsed.scheme do
      "memory" ->
        table = :"#{name}.Memory"

        {Stores.Memory.handle(table),
         [{Stores.Memory, [name: table] ++ Stores.Memory.url_options(parsed)}]}

      _ ->
        case Larder.Stores.open(url) do
          {:ok, handle} -> {handle, []}
          {:error, e} -> raise ArgumentError, Exception.message(e)
        end
    end
  end

  defp config(cache), do: :persistent_term.get({__MODULE__, cache})

  @doc "The store this cache writes to."
  def store(cache), do: config(cache).store

  @doc "The key the store holds for `key` (namespaced, made safe)."
  def store_key(cache, key), do: Keys.namespaced_key(config(cache).namespace, key)

  @doc """
  Counters: hits, misses, stale_served, loads, coalesced_waits, coalesced_across_processes, store_errors,
  corrupt_entries, refresh_errors, outage_kept (values kept in the outage memory because their write failed),
  outage_served (reads the store failed that the outage memory answered).
  """
  def stats(cache) do
    ref = config(cache).stats
    @stats |> Enum.with_index(1) |> Map.new(fn {k, i} -> {k, :counters.get(ref, i)} end)
  end

  @stat_index @stats |> Enum.with_index(1) |> Map.new()

  defp bump(cfg, stat), do: :counters.add(cfg.stats, Map.fetch!(@stat_index, stat), 1)

  # ------------------------------------------------------------------------------------------ verbs

  @doc "The value under `key`, or `default`. Options: `version`."
  def get(cache, key, opts \\ []) do
    cfg = config(cache)

    case lookup(cfg, Keys.namespaced_key(cfg.namespace, key), opts[:version]) do
      {:fresh, v} -> v
      _ -> Keyword.get(opts, :default)
    end
  end

  @doc "Stores `value` under `key`. Options: `ttl` (ms), `stale` (ms), `version`, `tags`. `:ok` or a store error."
  def put(cache, key, value, opts \\ []) do
    cfg = config(cache)
    write(cfg, Keys.namespaced_key(cfg.namespace, key), encode(cfg, value, opts))
  end

  @doc "Removes `key` (from the outage memory too)."
  def delete(cache, key) do
    cfg = config(cache)
    skey = Keys.namespaced_key(cfg.namespace, key)
    also_in_outage(cfg, Store.delete(cfg.store, skey), &Store.delete(&1, skey))
  end

  @doc "Removes every entry tagged `tag` (memcached: records the purge, `{:ok, :recorded}`; the outage memory too)."
  def purge_tag(cache, tag) do
    cfg = config(cache)
    also_in_outage(cfg, Store.purge_tag(cfg.store, tag), &Store.purge_tag(&1, tag))
  end

  @doc "Removes every key of this cache's namespace starting with `prefix` (from the outage memory too)."
  def purge_prefix(cache, prefix) do
    cfg = config(cache)
    prefix = if(cfg.namespace, do: cfg.namespace <> ":" <> prefix, else: prefix)
    also_in_outage(cfg, Store.purge_prefix(cfg.store, prefix), &Store.purge_prefix(&1, prefix))
  end

  # -------------------------------------------------------------------- the outage memory (STORES.md §3)

  # A store's answer: a good one empties the outage memory once no failure has been seen for a second (rule 4); a
  # failure is timed and marks it as possibly holding something. Returns the answer.
  defp answered(cfg, result) do
    case result do
      {:error, e} ->
        bump(cfg, :store_errors)
        if failure?(cfg, e), do: failed(cfg)

      _ ->
        recovered(cfg)
    end

    result
  end

  defp failure?(%{outage: nil}, _e), do: false
  defp failure?(_cfg, %Larder.StoreError{kind: kind}), do: kind in @failures
  defp failure?(_cfg, _e), do: false

  defp recovered(%{outage: nil}), do: :ok

  defp recovered(cfg) do
    # One atomic read on the way of every good answer while healthy. While failing, only a good answer once no
    # failure has been seen for @quiet_ms empties the memory (with several servers, the others answer while one
    # fails); the compare-exchange lets one of them do it.
    if :atomics.get(cfg.failing, 1) == 1 and
         System.monotonic_time(:millisecond) - :atomics.get(cfg.failing, 2) >= @quiet_ms and
         :atomics.compare_exchange(cfg.failing, 1, 1, 0) == :ok,
       do: Store.clear(cfg.outage)

    :ok
  end

  # A failure of the store: its time first, then the flag, so a good answer never sees the flag with an older time.
  defp failed(cfg) do
    :atomics.put(cfg.failing, 2, System.monotonic_time(:millisecond))
    :atomics.put(cfg.failing, 1, 1)
  end

  # A delete or purge: applied to the store, then (when it may hold anything) to the outage memory.
  defp also_in_outage(cfg, result, op) do
    answered(cfg, result)
    if cfg.outage != nil and :atomics.get(cfg.failing, 1) == 1, do: op.(cfg.outage)
    result
  end

  # A write of an entry: one the store fails is kept in the outage memory with the expiry the store would have given
  # it (the entry's own, stale window included: Larder.Stores.Memory applies Store.expiry/3 as every store does).
  # The flag is raised after the value is in, so the store's next good answer always finds it and empties it.
  defp write(cfg, skey, data) do
    result = Store.set(cfg.store, skey, data)

    case answered(cfg, result) do
      {:error, e} ->
        if failure?(cfg, e) and Store.set(cfg.outage, skey, data) == :ok do
          failed(cfg)
          bump(cfg, :outage_kept)
        end

      _ ->
        :ok
    end

    result
  end

  # A read the store failed: the outage memory's copy, if any.
  defp from_outage(cfg, skey, version) do
    case Store.get(cfg.outage, skey) do
      {:ok, raw} ->
        case decode(cfg, raw, version) do
          :miss ->
            :miss

          found ->
            bump(cfg, :outage_served)
            found
        end

      _ ->
        :miss
    end
  end

  @doc """
  The value under `key`; on a miss `fallback.()` computes it (once per key across this node's processes, and
  once across processes sharing the store, spec/STORES.md §3) and it is stored. Options: `ttl` (ms; nil = no
  expiry), `stale` (ms a value may be served after `ttl` while one caller refreshes it), `version` (a stored
  value of another version is a miss), `tags`. The fallback's exception reaches every waiting caller and nothing
  is stored. A value that cannot be written as MessagePack raises ArgumentError.
  """
  def fetch(cache, key, fallback, opts \\ []) when is_function(fallback, 0) do
    cfg = config(cache)
    skey = Keys.namespaced_key(cfg.namespace, key)

    case lookup(cfg, skey, opts[:version]) do
      {:fresh, v} ->
        bump(cfg, :hits)
        v

      {:stale, v} = found ->
        bump(cfg, :misses)
        refresh_in_background(cfg, skey, found, fallback, opts)
        bump(cfg, :stale_served)
        v

      :miss ->
        bump(cfg, :misses)
        coalesced(cfg, skey, fallback, opts)
    end
  end

  # A stale entry: one task of this node refreshes it (under the store lock); every caller gets the stale value.
  defp refresh_in_background(cfg, skey, found, fallback, opts) do
    if lead_flight?(cfg, skey) do
      Task.Supervisor.start_child(cfg.tasks, fn ->
        result =
          try do
            {:ok, lead(cfg, skey, found, fallback, opts)}
          rescue
            e ->
              bump(cfg, :refresh_errors)
              {:raise, e, __STACKTRACE__}
          end

        finish_flight(cfg, skey, result)
      end)
    end
  catch
    :exit, _ -> :ok
  end

  defp lead_flight?(cfg, skey) do
    :ets.insert_new(cfg.flights, {skey, self()})
  rescue
    ArgumentError -> false
  end

  # A miss: lead this node's callers of the key, or wait for the one leading.
  defp coalesced(cfg, skey, fallback, opts) do
    case lead_or_wait(cfg, skey) do
      :lead ->
        result =
          try do
            {:ok, lead(cfg, skey, :miss, fallback, opts)}
          rescue
            e -> {:raise, e, __STACKTRACE__}
          catch
            kind, reason -> {:catch, kind, reason, __STACKTRACE__}
          end

        finish_flight(cfg, skey, result)
        unwrap(result)

      :uncoalesced ->
        lead(cfg, skey, :miss, fallback, opts)

      {:result, result} ->
        bump(cfg, :coalesced_waits)
        unwrap(result)

      :retry ->
        fetch_again(cfg, skey, fallback, opts)
    end
  end

  defp fetch_again(cfg, skey, fallback, opts) do
    case lookup(cfg, skey, opts[:version]) do
      {:fresh, v} -> v
      {:stale, v} -> v
      :miss -> coalesced(cfg, skey, fallback, opts)
    end
  end

  defp unwrap({:ok, v}), do: v
  defp unwrap({:raise, e, st}), do: reraise(e, st)
  defp unwrap({:catch, kind, reason, st}), do: :erlang.raise(kind, reason, st)

  defp lead_or_wait(cfg, skey) do
    if :ets.insert_new(cfg.flights, {skey, self()}) do
      :lead
    else
      ref = make_ref()
      :ets.insert(cfg.waiters, {skey, self(), ref})

      # The leader removes its flight before it takes the waiters: if it is still there, it will answer us.
      case :ets.lookup(cfg.flights, skey) do
        [{_, leader}] ->
          mref = Process.monitor(leader)

          receive do
            {:larder_flight, ^ref, result} ->
              Process.demonitor(mref, [:flush])
              {:result, result}

            {:DOWN, ^mref, _, _, _} ->
              # A leader that died without finishing leaves its flight behind: clear it, then look again.
              :ets.delete_object(cfg.flights, {skey, leader})
              :ets.delete_object(cfg.waiters, {skey, self(), ref})
              flush(ref)
              :retry
          end

        [] ->
          :ets.delete_object(cfg.waiters, {skey, self(), ref})
          flush(ref)
          :retry
      end
    end
  rescue
    ArgumentError -> :uncoalesced
  end

  defp flush(ref) do
    receive do
      {:larder_flight, ^ref, _} -> :ok
    after
      0 -> :ok
    end
  end

  defp finish_flight(cfg, skey, result) do
    :ets.delete(cfg.flights, skey)

    for {_, pid, ref} <- :ets.take(cfg.waiters, skey) do
      send(pid, {:larder_flight, ref, result})
    end

    :ok
  rescue
    ArgumentError -> :ok
  end

  # The one lock policy (spec/STORES.md §3) for this node's leader of `skey`.
  defp lead(cfg, skey, found, fallback, opts) do
    lead_loop(cfg, skey, found, fallback, opts, nil)
  end

  defp lead_loop(cfg, skey, found, fallback, opts, waited_since) do
    case try_lock(cfg, skey) do
      {:taken, lock_key, token} ->
        try do
          case peek(cfg, skey, opts[:version]) do
            {:ok, v} ->
              bump(cfg, :coalesced_across_processes)
              v

            :none ->
              compute(cfg, skey, fallback, opts)
          end
        after
          unlock(cfg, lock_key, token)
        end

      :no_store ->
        compute(cfg, skey, fallback, opts)

      :held ->
        case found do
          {:stale, v} ->
            bump(cfg, :stale_served)
            v

          :miss ->
            since = waited_since || System.monotonic_time(:millisecond)

            case await_other(cfg, skey, opts[:version], since + cfg.lock_ttl, @poll_first) do
              {:ok, v} ->
                bump(cfg, :coalesced_across_processes)
                v

              :waited_lock_ttl ->
                compute(cfg, skey, fallback, opts)

              :lock_gone ->
                lead_loop(cfg, skey, found, fallback, opts, since)
            end
        end
    end
  end

  defp compute(cfg, skey, fallback, opts) do
    bump(cfg, :loads)
    value = fallback.()
    write(cfg, skey, encode(cfg, value, opts))
    value
  end

  defp encode(cfg, value, []), do: Entry.encode_value(value, cfg.compressor, nil, 0, nil, [])

  defp encode(cfg, value, opts) do
    ttl = opts[:ttl]

    Entry.encode_value(
      value,
      cfg.compressor,
      ttl,
      if(ttl, do: opts[:stale] || 0, else: 0),
      opts[:version],
      opts[:tags] || []
    )
  end

  defp lock_key(skey), do: Keys.internal_key(nil, "lock", skey)

  defp try_lock(%{shared: false}, _skey), do: :no_store

  defp try_lock(cfg, skey) do
    key = lock_key(skey)
    token = Base.encode16(:crypto.strong_rand_bytes(8), case: :lower)

    case answered(cfg, Store.add(cfg.store, key, token, cfg.lock_ttl)) do
      {:ok, true} -> {:taken, key, token}
      {:ok, false} -> :held
      {:error, _} -> :no_store
    end
  end

  defp unlock(cfg, key, token) do
    answered(cfg, Store.delete_if(cfg.store, key, token))
    :ok
  end

  defp await_other(cfg, skey, version, deadline, pause) do
    Process.sleep(pause)

    case peek(cfg, skey, version) do
      {:ok, v} ->
        {:ok, v}

      :none ->
        cond do
          System.monotonic_time(:millisecond) >= deadline ->
            :waited_lock_ttl

          not locked?(cfg, skey) ->
            # The holder may have written just before it released: look once more.
            case peek(cfg, skey, version) do
              {:ok, v} -> {:ok, v}
              :none -> :lock_gone
            end

          true ->
            await_other(cfg, skey, version, deadline, min(pause * 2, @poll_most))
        end
    end
  end

  defp locked?(cfg, skey), do: match?({:ok, _}, Store.get(cfg.store, lock_key(skey)))

  defp peek(cfg, skey, version) do
    case lookup(cfg, skey, version) do
      {:fresh, v} -> {:ok, v}
      _ -> :none
    end
  end

  # The store first; the outage memory only when the store fails (a good answer, even a miss, once no failure has
  # been seen for a second, empties it first).
  defp lookup(cfg, skey, version) do
    case answered(cfg, Store.get(cfg.store, skey)) do
      {:ok, raw} ->
        decode(cfg, raw, version)

      :miss ->
        :miss

      {:error, e} ->
        if failure?(cfg, e), do: from_outage(cfg, skey, version), else: :miss
    end
  end

  defp decode(cfg, raw, version) do
    case Entry.decode(raw, max_size: cfg.max_size) do
      {:ok, %Entry{kind: :value} = e} ->
        now = Entry.now_ms()
        fresh = not Entry.expired?(e, now)
        hard = Entry.hard_expiry(e)

        cond do
          version != nil and e.version != version -> :miss
          fresh -> {:fresh, e.value}
          hard != nil and now < hard -> {:stale, e.value}
          true -> :miss
        end

      _ ->
        case {version, Store.parse_counter(raw)} do
          {nil, n} when is_integer(n) ->
            {:fresh, n}

          _ ->
            bump(cfg, :corrupt_entries)
            :miss
        end
    end
  end
end
