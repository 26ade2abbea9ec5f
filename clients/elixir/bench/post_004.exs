# The measurements of source document 004 ("Make Phoenix Even Faster with a GenServer-backed Key Value Store"),
# today, side by side with the post's own figures. Run from clients/elixir (about a minute; N and SECS shrink it):
#
#   mix run bench/post_004.exs            # N=1000000 entries, SECS=10 per load test
#   N=100000 SECS=3 mix run bench/post_004.exs
#   ONLY=larder SECS=0 mix run bench/post_004.exs   # one design alone (ONLY=post for the other); SECS=0: no load test
#
# 1. One million `fetch(to_string(i), fn -> link end)` into (a) the post's own design, a GenServer owning a
#    private ETS table of terms, and (b) Larder.Cache on a memory:// store (larder entries: MessagePack bytes,
#    readable by every language), filled side by side in alternating chunks of 50,000. Memory is what the ETS
#    tables hold (plus, for larder, the off-heap binaries of its entries); inserts per second are N / the time
#    spent in that design's chunks; hits per second are one more pass of N fetches that all hit.
# 2. The URL shortener (Larder.Shortener on :httpd) under 500 concurrent users (wrk -c 500; the post used siege),
#    with the cache and without it (every request queries Larder.Shortener.DB: 10 connections, 5 ms a query).
# 3. The same app (with the cache) behind `larder serve --store memcached://…` (the Rust front: LARDER_BIN, else
#    target/release/larder, else target/debug/larder), writing its pages into that memcached through Larder.Pages:
#    the app renders /abc once (a request straight to it, Host the front's), then wrk against the front, which
#    answers from the shared store; the app's render count says how many of wrk's requests reached Elixir
#    (a store read that times out goes to the app; STORE_TIMEOUT=1s lengthens the front's and the app's store
#    timeout, 250 ms by default). Needs memcached (started here on a free loopback port).
# Figures move between runs on a shared 2-core machine: compare the columns of one run, as ratios.

n = String.to_integer(System.get_env("N", "1000000"))
secs = String.to_integer(System.get_env("SECS", "10"))

defmodule PostLinkCache do
  # The post's LinkCache.Cache, as printed (fetch through GenServer.call, a private ETS table of terms).
  use GenServer

  def start_link, do: GenServer.start_link(__MODULE__, :link_cache_table, name: __MODULE__)

  def fetch(slug, default_value_function) do
    case get(slug) do
      {:not_found} -> set(slug, default_value_function.())
      {:found, result} -> result
    end
  end

  defp get(slug) do
    case GenServer.call(__MODULE__, {:get, slug}) do
      [] -> {:not_found}
      [{_slug, result}] -> {:found, result}
    end
  end

  defp set(slug, value), do: GenServer.call(__MODULE__, {:set, slug, value})

  def init(table), do: {:ok, :ets.new(table, [:set, :private])}
  def handle_call({:get, slug}, _from, t), do: {:reply, :ets.lookup(t, slug), t}
  def handle_call({:set, slug, value}, _from, t), do: {:reply, :ets.insert(t, {slug, value}) && value, t}
end

defmodule Bench do
  def link(i) do
    %{
      "id" => i,
      "slug" => Integer.to_string(i, 36),
      "long_url" => "http://www.example.com/articles/2016/07/make-phoenix-even-faster",
      "inserted_at" => "2016-07-13T12:00:00Z",
      "updated_at" => "2016-07-13T12:00:00Z"
    }
  end

  # Both designs filled side by side, in alternating chunks, so that both see the same machine (a shared 2-core
  # machine's load moves a lot within a minute). Returns per design {seconds, MB, inserts/s, hits/s}. Memory: the
  # ETS tables' words, plus (larder) the off-heap binaries its entries grew by.
  def fill_both(n, post_table, larder_tables) do
    link = link(1)
    chunk = 50_000
    bin0 = :erlang.memory(:binary)

    fetches =
      Enum.filter(
        [post: &PostLinkCache.fetch/2, larder: &Larder.Cache.fetch(BenchCache, &1, &2)],
        fn {name, _} -> System.get_env("ONLY", "both") in ["both", Atom.to_string(name)] end
      )

    time = fn fun ->
      Enum.reduce(Enum.chunk_every(1..n, chunk), %{}, fn range, acc ->
        Enum.reduce(fetches, acc, fn {name, fetch}, acc ->
          # Each chunk in a fresh process, as requests run in their own: a caller's heap (the post's replies are
          # copied into it) does not carry over from one design's chunk to the other's.
          work = fn -> Enum.each(range, fn i -> fun.(fetch, Integer.to_string(i), link) end) end
          {t, _} = :timer.tc(fn -> Task.await(Task.async(work), :infinity) end)
          Map.update(acc, name, t, &(&1 + t))
        end)
      end)
    end

    inserts = time.(fn fetch, k, v -> fetch.(k, fn -> v end) end)
    :erlang.garbage_collect()
    Process.sleep(300)
    words = :erlang.system_info(:wordsize)
    post_mb = :ets.info(post_table.(), :memory) * words / 1.0e6
    larder_mb = (Enum.sum(Enum.map(larder_tables, &:ets.info(&1, :memory))) * words + :erlang.memory(:binary) - bin0) / 1.0e6
    hits = time.(fn fetch, k, _ -> fetch.(k, fn -> raise "miss" end) end)

    for {name, mb} <- [post: post_mb, larder: larder_mb], into: %{} do
      case inserts[name] do
        nil -> {name, {0.0, mb, 0, 0}}
        t -> {name, {t / 1.0e6, mb, round(n / (t / 1.0e6)), round(n / (hits[name] / 1.0e6))}}
      end
    end
  end

  # One request straight to the app, as the front would forward it (Host is the front's): the app renders the page
  # and writes it through Larder.Pages, so the load test measures the front serving it from the shared store.
  def render_once(app_port, front_port) do
    {:ok, s} = :gen_tcp.connect({127, 0, 0, 1}, app_port, [:binary, active: false], 5_000)
    :ok = :gen_tcp.send(s, "GET /abc HTTP/1.1\r\nhost: 127.0.0.1:#{front_port}\r\nconnection: close\r\n\r\n")
    {:ok, "HTTP/1.1 302" <> _} = :gen_tcp.recv(s, 0, 5_000)
    :gen_tcp.close(s)
  end

  def wrk(port, secs) do
    out = to_string(:os.cmd(~c"wrk -t2 -c500 -d#{secs}s --timeout 10s http://127.0.0.1:#{port}/abc 2>&1"))
    rps = Regex.run(~r/Requests\/sec:\s+([\d.]+)/, out) |> Enum.at(1) |> String.to_float()
    requests = Regex.run(~r/(\d+) requests in/, out) |> Enum.at(1) |> String.to_integer()
    latency = Regex.run(~r/Latency\s+([\d.]+\w+)/, out) |> Enum.at(1)
    errors = case Regex.run(~r/Socket errors: (.*)/, out) do
      nil -> 0
      [_, text] -> Regex.scan(~r/\d+/, text) |> List.flatten() |> Enum.map(&String.to_integer/1) |> Enum.sum()
    end
    bad = case Regex.run(~r/Non-2xx or 3xx responses: (\d+)/, out) do
      nil -> 0
      [_, k] -> String.to_integer(k)
    end
    %{rps: round(rps), requests: requests, latency: latency, failed: errors + bad}
  end
end

IO.puts("# 004 today: #{n} entries, load tests of #{secs} s, #{System.schedulers_online()} schedulers, OTP #{System.otp_release()}")

{:ok, _} = PostLinkCache.start_link()
{:ok, sup} = Larder.Cache.start_link(name: BenchCache, store: "memory://?capacity=4G")
post_table = fn -> :sys.get_state(PostLinkCache) end
filled = Bench.fill_both(n, post_table, [:"Elixir.BenchCache.Memory"])
{post_s, post_mb, post_ins, post_hits} = filled.post
{lar_s, lar_mb, lar_ins, lar_hits} = filled.larder
stats = Larder.Cache.stats(BenchCache)
GenServer.stop(PostLinkCache)
Supervisor.stop(sup)

{cached, uncached} =
  if secs > 0 do
    Larder.Shortener.DB.start(10, 5)
    {:ok, _} = Larder.Cache.start_link(name: ShortCache, store: "memory://")
    {:ok, with_pid, with_port} = Larder.Shortener.start(cache: ShortCache)
    cached = Bench.wrk(with_port, secs)
    Larder.Shortener.stop(with_pid)
    {:ok, without_pid, without_port} = Larder.Shortener.start(cache: nil)
    uncached = Bench.wrk(without_port, secs)
    Larder.Shortener.stop(without_pid)
    {cached, uncached}
  else
    none = %{rps: "-", latency: "-", failed: "-", requests: "-"}
    {none, none}
  end

# The front: Larder.TestServers starts memcached and larder serve as the tests do (killed when the VM exits).
root = Path.expand("../../..", __DIR__)
Code.require_file(Path.join(root, "clients/elixir/test/support/servers.ex"))

{fronted, reached} =
  if secs > 0 do
    bin =
      System.get_env("LARDER_BIN") ||
        Enum.find(
          [Path.join(root, "target/release/larder"), Path.join(root, "target/debug/larder")],
          &File.exists?/1
        ) || raise "no larder binary: cargo build -p larder-cli --release"

    {mc, mc_port} = Larder.TestServers.memcached()
    # STORE_TIMEOUT=1s gives the store reads longer than spec/STORES.md's 250 ms default on a loaded machine.
    store = "memcached://127.0.0.1:#{mc_port}" <> ((t = System.get_env("STORE_TIMEOUT")) && "?timeout=#{t}" || "")
    {:ok, pages} = Larder.Pages.new(store, namespace: "bench")
    {:ok, app_pid, app_port} = Larder.Shortener.start(cache: ShortCache, pages: pages)
    front_port = Larder.TestServers.free_port()
    admin_port = Larder.TestServers.free_port()

    front =
      Larder.TestServers.larder_serve(
        bin,
        ~w(--upstream http://127.0.0.1:#{app_port} --listen 127.0.0.1:#{front_port}
           --admin 127.0.0.1:#{admin_port} --admin-no-token --store #{store} --namespace bench),
        front_port
      )

    IO.puts("# front: #{Path.relative_to(bin, root)} --store memcached (#{store})")
    Bench.render_once(app_port, front_port)
    written = Larder.Pages.stats(pages)["stored"]
    fronted = Bench.wrk(front_port, secs)
    reached = "#{Larder.Shortener.renders() - 1} (the page written first: #{written})"
    # The front's own count (its /metrics): a store read that fails (timeout=250ms by default) goes to the app.
    {:ok, {_, _, metrics}} = :httpc.request(~c"http://127.0.0.1:#{admin_port}/metrics")
    metric = fn name -> (Regex.run(~r/^#{Regex.escape(name)} (\d+)$/m, to_string(metrics)) || [nil, "?"]) |> Enum.at(1) end
    reached = "#{reached}; the front's hits #{metric.(~s(larder_requests_total{cache="hit"}))}, misses #{metric.(~s(larder_requests_total{cache="miss"}))}, store errors #{metric.("larder_store_errors_total")}"
    Larder.TestServers.stop(front, front_port)
    Larder.Shortener.stop(app_pid)
    Larder.TestServers.stop(mc, mc_port)
    {fronted, reached}
  else
    {%{rps: "-", latency: "-", failed: "-", requests: "-"}, "-"}
  end

row = fn label, post, today -> IO.puts("| #{label} | #{post} | #{today} |") end
IO.puts("")
IO.puts("| measurement | the post (2016, Heroku free dyno) | today, post's design | today, Larder.Cache memory:// |")
IO.puts("|---|---|---|---|")
IO.puts("| memory for #{n} entries | ~856 MB (1M) | #{round(post_mb)} MB | #{round(lar_mb)} MB |")
IO.puts("| inserts per second | ~25,000 | #{post_ins} (#{Float.round(post_s, 1)} s) | #{lar_ins} (#{Float.round(lar_s, 1)} s) |")
IO.puts("| hits per second, one caller | — | #{post_hits} | #{lar_hits} |")
IO.puts("")
IO.puts("| 500 concurrent users | the post: DB read | the post: cache read | today: DB read | today: Larder.Cache | today: behind larder serve, page in memcached |")
IO.puts("|---|---|---|---|---|---|")
row.("requests per second", "493.86 | 754.95", "#{uncached.rps} | #{cached.rps} | #{fronted.rps}")
row.("average response time", "0.70 s | 0.38 s", "#{uncached.latency} | #{cached.latency} | #{fronted.latency}")
row.("failed requests", "0 | 0", "#{uncached.failed} of #{uncached.requests} | #{cached.failed} of #{cached.requests} | #{fronted.failed} of #{fronted.requests}")
row.("requests that reached Elixir", "— | —", "all | all | #{reached}")
IO.puts("\n(larder cache stats for the fill: #{inspect(Map.take(stats, [:hits, :misses, :loads, :store_errors]))})")
