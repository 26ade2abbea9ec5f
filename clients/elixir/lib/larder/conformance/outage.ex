defmodule Larder.Conformance.Outage do
  @moduledoc """
  spec/vectors/outage.json (README, "outage.json"; spec/STORES.md §3, "When the store fails"): `fetch` on a cache
  whose store sits behind `larder-faults`.

  For each case: `$LARDER_FAULTS HOST:PORT` in front of the real server (`LARDER_CONFORMANCE_MEMCACHED` or
  `LARDER_CONFORMANCE_REDIS`), which prints `127.0.0.1:PORT` and answers each command line with `ok`; two
  `Larder.Cache`s with the same fresh random namespace, the *faulted* one over the proxy (`url_query`, default
  options otherwise: outage memory on) and the *direct* one over the server; then the steps in order. A failure
  names the step (its index and kind) and what differed.
  """

  alias Larder.{Cache, Store}
  alias Larder.Conformance.Mismatch

  @needs ~w(LARDER_FAULTS LARDER_CONFORMANCE_MEMCACHED LARDER_CONFORMANCE_REDIS)
  # larder-faults prints its address and answers each command within this.
  @faults_ms 5_000
  # A burst's callers are given this much beyond the round's bound before the case fails without them.
  @grace_ms 5_000

  @doc "The environment variables outage.json needs."
  def needs, do: @needs

  @doc "`[{name, check}]` for outage.json's document, with the servers and larder-faults from `env`."
  def cases(doc, env) do
    ctx = %{
      faults: env["LARDER_FAULTS"],
      servers: %{
        "memcached" => env["LARDER_CONFORMANCE_MEMCACHED"],
        "redis" => env["LARDER_CONFORMANCE_REDIS"]
      }
    }

    for v <- get(doc, "cases"), do: {get(v, "name"), fn -> run_case(v, ctx) end}
  end

  defp run_case(v, ctx) do
    store = get(v, "store")
    server = Map.get(ctx.servers, store) || fail("unknown store #{inspect(store)}")
    query = get(v, "url_query") || ""
    {proxy, addr} = start_faults(ctx.faults, server)
    namespace = "outage-" <> Base.encode16(:crypto.strong_rand_bytes(8), case: :lower)

    try do
      faulted = start_cache(url(store, addr, query), namespace)

      try do
        direct = start_cache(url(store, server, ""), namespace)

        try do
          c = %{proxy: proxy, faulted: faulted, direct: direct}

          for {step, i} <- Enum.with_index(get(v, "steps")) do
            try do
              step(step, c)
            rescue
              e in Mismatch ->
                reraise Mismatch,
                        [message: "step #{i} (#{kind(step)}): #{e.message}"],
                        __STACKTRACE__
            end
          end
        after
          stop_cache(direct)
        end
      after
        stop_cache(faulted)
      end
    after
      stop_faults(proxy)
    end

    :ok
  end

  defp url("memcached", addr, query), do: "memcached://#{addr}" <> query(query)
  defp url("redis", addr, query), do: "redis://#{addr}/0" <> query(query)

  defp query(""), do: ""
  defp query(q), do: "?" <> q

  defp kind(step) do
    Enum.find(~w(fault burst write_direct read_direct flush_direct await_value), "?", fn k ->
      get(step, k) != nil
    end)
  end

  # ---------------------------------------------------------------------------------------------- steps

  defp step(step, c) do
    cond do
      (command = get(step, "fault")) != nil -> fault(c.proxy, command)
      (b = get(step, "burst")) != nil -> burst(c.faulted, b, get(step, "expect"))
      (w = get(step, "write_direct")) != nil -> write_direct(c.direct, w)
      (r = get(step, "read_direct")) != nil -> read_direct(c.direct, r)
      get(step, "flush_direct") != nil -> flush_direct(c.direct)
      (a = get(step, "await_value")) != nil -> await_value(c.faulted, a)
      true -> fail("unknown step #{inspect(step)}")
    end
  end

  defp burst(cache, b, expect) do
    key = get(b, "key")
    want = get(expect, "value")
    within = get(expect, "round_within_ms")
    loads = :counters.new(1, [:atomics])
    loader_ms = get(b, "loader_ms")
    loader_value = get(b, "loader_value")

    loader = fn ->
      :counters.add(loads, 1, 1)
      Process.sleep(loader_ms)
      loader_value
    end

    for round <- 1..get(b, "rounds") do
      started = System.monotonic_time(:millisecond)

      tasks =
        for _ <- 1..get(b, "callers"),
            do: Task.async(fn -> call(fn -> Cache.fetch(cache, key, loader, ttl: 60_000) end) end)

      results = Task.yield_many(tasks, within + @grace_ms)
      took = System.monotonic_time(:millisecond) - started

      for {task, result} <- results do
        case result do
          {:ok, {:ok, ^want}} ->
            :ok

          {:ok, {:ok, other}} ->
            fail("round #{round}: a caller got #{short(other)}, not #{short(want)}")

          {:ok, {:raised, message}} ->
            fail("round #{round}: a caller raised #{message}")

          _ ->
            did_not_return(task, round)
        end
      end

      if took > within, do: fail("round #{round} took #{took} ms, not within #{within} ms")
    end

    ran = :counters.get(loads, 1)

    case {get(expect, "loads"), get(expect, "loads_at_most")} do
      {nil, nil} ->
        :ok

      {n, _} when is_integer(n) and ran != n ->
        fail("the loader ran #{ran} times, not #{n}")

      {_, most} when is_integer(most) and ran > most ->
        fail("the loader ran #{ran} times, more than #{most}")

      _ ->
        :ok
    end
  end

  defp did_not_return(task, round) do
    Task.shutdown(task, :brutal_kill)
    fail("round #{round}: a caller did not return")
  end

  defp call(fun) do
    {:ok, fun.()}
  rescue
    e -> {:raised, Exception.message(e)}
  catch
    kind, value -> {:raised, "#{kind}: #{inspect(value)}"}
  end

  defp write_direct(cache, w) do
    case Cache.put(cache, get(w, "key"), get(w, "value"), ttl: 60_000) do
      :ok -> :ok
      other -> fail("the direct write failed: #{short(other)}")
    end
  end

  defp read_direct(cache, r) do
    want = get(r, "value")

    case Cache.get(cache, get(r, "key")) do
      ^want -> :ok
      other -> fail("the direct read answered #{short(other)}, not #{short(want)}")
    end
  end

  defp flush_direct(cache) do
    case Store.clear(Cache.store(cache)) do
      :ok -> :ok
      other -> fail("the direct clear failed: #{short(other)}")
    end
  end

  defp await_value(cache, a) do
    key = get(a, "key")
    want = get(a, "value")
    loader_value = get(a, "loader_value")
    deadline = System.monotonic_time(:millisecond) + get(a, "within_ms")
    await(cache, key, want, fn -> loader_value end, deadline, nil)
  end

  defp await(cache, key, want, loader, deadline, last) do
    if System.monotonic_time(:millisecond) > deadline do
      fail("fetch did not return #{short(want)} in time; it last returned #{last}")
    end

    case call(fn -> Cache.fetch(cache, key, loader, ttl: 60_000) end) do
      {:ok, ^want} ->
        :ok

      other ->
        Process.sleep(100)
        await(cache, key, want, loader, deadline, short(other))
    end
  end

  # ----------------------------------------------------------------------------------- caches and proxy

  defp start_cache(url, namespace) do
    name = :"larder_outage_#{System.unique_integer([:positive])}"

    case Cache.start_link(name: name, store: url, namespace: namespace) do
      {:ok, pid} ->
        Process.unlink(pid)
        name

      other ->
        fail("cannot start a cache on #{url}: #{short(other)}")
    end
  end

  defp stop_cache(name) do
    Supervisor.stop(name)
  catch
    :exit, _ -> :ok
  end

  # larder-faults prints its address, then takes one command per line until its standard input closes.
  defp start_faults(bin, server) do
    port =
      try do
        Port.open({:spawn_executable, bin}, [:binary, {:line, 4096}, args: [server]])
      rescue
        e -> fail("cannot start #{bin}: #{Exception.message(e)}")
      end

    receive do
      {^port, {:data, {:eol, "127.0.0.1:" <> _ = addr}}} -> {port, addr}
    after
      @faults_ms ->
        stop_faults(port)
        fail("#{bin} #{server} printed no address")
    end
  end

  defp fault(port, command) do
    Port.command(port, command <> "\n")

    receive do
      {^port, {:data, {:eol, "ok" <> _}}} ->
        :ok

      {^port, {:data, {:eol, line}}} ->
        fail("larder-faults answered #{inspect(line)} to #{command}")
    after
      @faults_ms -> fail("larder-faults did not answer #{command}")
    end
  end

  defp stop_faults(port) do
    if Port.info(port) != nil, do: Port.close(port)
    drain(port)
  end

  defp drain(port) do
    receive do
      {^port, _} -> drain(port)
    after
      0 -> :ok
    end
  end

  defp short(term), do: inspect(term, limit: 8, printable_limit: 120)
  defp fail(message), do: raise(Mismatch, message)
  defp get(doc, key), do: Larder.Conformance.get(doc, key)
end
