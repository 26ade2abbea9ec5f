# Issue 34, Elixir: Larder.Cache against what Elixir users keep, interleaved in one VM, several rounds, with the
# values an application caches (a query result, a nested document, a rendered page) beside the post's inserts.
#
#   cd clients/elixir && ELIXIR_ERL_OPTIONS="+sbwt none +sbwtdcpu none +sbwtdio none" \
#     mix run bench/structured.exs [--rounds 5] [--n 1000000] [--ops 2000] [--only inserts,memory,network] \
#       [--quick] [--raw FILE]
#
# 1. inserts: N `fetch(key, fn -> link end)` misses (source document 004's link map) into the post's design (a
#    GenServer owning a private ETS table of terms, every get and set a GenServer.call: bench/post_004.exs) and into
#    Larder.Cache on memory:// (capacity 4G: its byte bound is kept and checked), each from empty, in chunks of 50,000
#    run by fresh processes, the designs' order alternating per round.
# 2. memory: put and get of structured values in process: Larder.Cache on memory:// against the post's design and
#    a plain public ETS table holding :erlang.term_to_binary values (what Cachex-less code does; no Hex here).
# 3. network: the same on memcached and redis-server (started here on free loopback ports): Larder.Cache against
#    :erlang.term_to_binary and jiffy's JSON (Debian's erlang-jiffy, when installed) written with larder's own socket
#    clients (Larder.Stores.Memcached/Redis): the peers share larder's connection code, so the ratio is what the
#    entry (MessagePack, LZ4 above 1 KiB, header) and Larder.Cache's bookkeeping cost against a bare encoder.
#
# Per measurement: ops/s (wall clock: moves with the load of a shared machine), CPU µs per op (the VM's CPU time;
# with the options above idle schedulers do not spin, so it does not count waiting) and reductions per op (the BEAM's
# own work count, summed over the caller and the store's owner process: does not depend on the load at all).
# Printed: medians with min-max per case and subject, and larder's ratio. --raw FILE appends bench/report.py's JSON
# lines (bench "elixir", targets: larder >= 1.0x every peer in ops/s).

{opts, _, _} =
  OptionParser.parse(System.argv(),
    strict: [
      rounds: :integer,
      n: :integer,
      ops: :integer,
      only: :string,
      quick: :boolean,
      raw: :string
    ]
  )

quick = Keyword.get(opts, :quick, false)
rounds = Keyword.get(opts, :rounds, if(quick, do: 1, else: 5))
n = Keyword.get(opts, :n, if(quick, do: 100_000, else: 1_000_000))
ops = Keyword.get(opts, :ops, if(quick, do: 200, else: 2_000))
only = opts |> Keyword.get(:only, "inserts,memory,network") |> String.split(",")
raw = Keyword.get(opts, :raw)

root = Path.expand("../../..", __DIR__)
Code.require_file(Path.join(root, "clients/elixir/test/support/servers.ex"))
Code.require_file("structured/designs.exs", __DIR__)
Code.require_file("structured/shapes.exs", __DIR__)
Code.require_file("structured/measure.exs", __DIR__)

alias Bench.{Measure, Post, Shapes}

started = DateTime.utc_now() |> DateTime.truncate(:second)

IO.puts(
  "# bench/structured.exs: #{rounds} rounds, #{n} inserts, #{ops} ops per value and round; " <>
    "#{System.schedulers_online()} schedulers, OTP #{System.otp_release()}, Elixir #{System.version()}; " <>
    "#{DateTime.to_iso8601(started)}; load #{:os.cmd(~c"cut -d' ' -f1-3 /proc/loadavg") |> to_string() |> String.trim()}"
)

rows = []

# ------------------------------------------------------------------------------------------------ 1. inserts
rows =
  if "inserts" in only do
    link = Shapes.link(1)

    designs = [
      {"post-004",
       fn ->
         {:ok, pid} = Post.start_link()
         {&Post.fetch/2, pid, fn -> GenServer.stop(pid) end, fn -> :ok end}
       end},
      {"larder",
       fn ->
         {:ok, sup} = Larder.Cache.start_link(name: BenchInserts, store: "memory://?capacity=4G")
         owner = Process.whereis(:"Elixir.BenchInserts.Memory")

         # The byte bound, checked: what the owner counts is what it holds, and never above its capacity.
         check = fn ->
           s = Larder.Stores.Memory.stats(:"Elixir.BenchInserts.Memory")
           unless s.entries == n and s.bytes <= s.capacity, do: raise("byte bound: #{inspect(s)}")
         end

         {&Larder.Cache.fetch(BenchInserts, &1, &2), owner, fn -> Supervisor.stop(sup) end, check}
       end}
    ]

    for round <- 1..rounds, reduce: rows do
      rows ->
        order = if rem(round, 2) == 1, do: designs, else: Enum.reverse(designs)

        Enum.reduce(order, rows, fn {name, start}, rows ->
          {fetch, owner, stop, check} = start.()

          m =
            Measure.chunked(n, 50_000, owner, fn i ->
              fetch.(Integer.to_string(i), fn -> link end)
            end)

          check.()
          stop.()
          :erlang.garbage_collect()

          IO.puts(
            "  round #{round} inserts #{name}: #{round(m.ops)}/s, #{Float.round(m.cpu_us, 2)} CPU µs/op"
          )

          [Map.merge(m, %{case: "inserts #{div(n, 1000)}k", subject: name, round: round}) | rows]
        end)
    end
  else
    rows
  end

# ------------------------------------------------------------------------------------------------ 2. memory
rows =
  if "memory" in only do
    {:ok, _} = Post.start_link()
    {:ok, _} = Larder.Cache.start_link(name: BenchMemory, store: "memory://?capacity=1G")
    larder_owner = Process.whereis(:"Elixir.BenchMemory.Memory")
    ets = :ets.new(:bench_t2b, [:set, :public, read_concurrency: true])

    subjects = [
      {"larder", larder_owner, &Larder.Cache.put(BenchMemory, &1, &2),
       &Larder.Cache.get(BenchMemory, &1)},
      {"post-004", Process.whereis(Post), &Post.set/2, &Post.get/1},
      {"ets-t2b", nil, &:ets.insert(ets, {&1, :erlang.term_to_binary(&2)}),
       fn k ->
         [{_, b}] = :ets.lookup(ets, k)
         :erlang.binary_to_term(b)
       end}
    ]

    Measure.values(rows, rounds, ops, Shapes.all(), subjects, "memory")
  else
    rows
  end

# ------------------------------------------------------------------------------------------------ 3. network
rows =
  if "network" in only do
    {mc, mc_port} = Larder.TestServers.memcached(args: ["-m", "256", "-I", "4m"])
    {rd, rd_port} = Larder.TestServers.redis()

    rows =
      Enum.reduce(
        # A 2 s timeout: this measures throughput, and a loaded machine can take longer than the 250 ms default.
        [
          {"memcached", "memcached://127.0.0.1:#{mc_port}?timeout=2s"},
          {"redis", "redis://127.0.0.1:#{rd_port}?timeout=2s"}
        ],
        rows,
        fn {label, url}, rows ->
          name = :"Elixir.BenchNet#{label}"
          {:ok, _} = Larder.Cache.start_link(name: name, store: url, outage_memory: 0)

          # The peers write through larder's own socket client for this store: the same pool, the same protocol code.
          {:ok, raw_store} = Larder.Stores.open(url)

          jiffy =
            if Code.ensure_loaded?(:jiffy) do
              [
                {"jiffy", nil,
                 &Larder.Store.set(
                   raw_store,
                   "j:" <> &1,
                   IO.iodata_to_binary(:jiffy.encode(&2, [:use_nil]))
                 ),
                 fn k ->
                   {:ok, b} = Larder.Store.get(raw_store, "j:" <> k)
                   :jiffy.decode(b, [:return_maps, :use_nil])
                 end}
              ]
            else
              IO.puts(
                "  (erlang-jiffy is not installed: apt-get install erlang-jiffy for the JSON peer)"
              )

              []
            end

          subjects =
            [
              {"larder", nil, &Larder.Cache.put(name, &1, &2), &Larder.Cache.get(name, &1)},
              {"t2b", nil, &Larder.Store.set(raw_store, "t:" <> &1, :erlang.term_to_binary(&2)),
               fn k ->
                 {:ok, b} = Larder.Store.get(raw_store, "t:" <> k)
                 :erlang.binary_to_term(b)
               end}
            ] ++ jiffy

          Measure.values(rows, rounds, div(ops, 4), Shapes.all(), subjects, label)
        end
      )

    Larder.TestServers.stop(mc, mc_port)
    Larder.TestServers.stop(rd, rd_port)
    rows
  else
    rows
  end

rows = Enum.reverse(rows)
Measure.print(rows)

if raw do
  command = "cd clients/elixir && mix run bench/structured.exs " <> Enum.join(System.argv(), " ")

  Measure.write_raw(raw, rows, command, started)
  IO.puts("raw rows appended to #{raw}")
end
