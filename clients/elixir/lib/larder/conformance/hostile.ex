defmodule Larder.Conformance.Hostile do
  @moduledoc """
  The four attack files of spec/vectors (README, "hostile_*.json"; issue 32), run through the library's own code
  paths: stores opened from their URLs (`Larder.Stores.open/1`, the memory store's own owner), the page cache's own
  key derivation (`Larder.Pages.key/2`, which `save` stores under).

  - `hostile_keys.json`: every key on `memory://`, `file://`, `sqlite://`, `memcached://` and `redis://`. An
    Elixir key is a binary, so each case passes `key_hex`'s bytes. What the servers and the directory hold is read
    by this module's own raw probes (`mg`, `flush_all`, RESP `GET`/`DBSIZE`/`FLUSHALL` over `:gen_tcp`, the file's
    header read from `<root>/<h[0..2]>/<h[2..4]>/<h>`), which send `wire_hex`'s bytes and never see a key as a string.
  - `hostile_pages.json`: the key (or the refusal) of each request.
  - `hostile_files.json`: `hostile_tree.py plant`, the operations on `file://ROOT`, `hostile_tree.py check`.
  - `hostile_replies.json`: every operation on a fresh store against `larder-hostile`, failing with the store's
    own error within the case's bound.

  The servers come from the environment (`LARDER_CONFORMANCE_MEMCACHED`, `LARDER_CONFORMANCE_REDIS`,
  `LARDER_HOSTILE`); a file whose variable is missing fails with a reason naming it.
  """

  alias Larder.{Pages, Store, StoreError}
  alias Larder.Conformance.Mismatch

  @files ~w(hostile_keys.json hostile_pages.json hostile_files.json hostile_replies.json)
  @needs %{
    "hostile_keys.json" => ~w(LARDER_CONFORMANCE_MEMCACHED LARDER_CONFORMANCE_REDIS),
    "hostile_replies.json" => ~w(LARDER_HOSTILE)
  }
  @key_stores [:memory, :file, :sqlite, :memcached, :redis]
  # hostile_files.json: every operation returns within this (a FIFO must not block a read).
  @file_op_ms 5_000
  # Raw probes and a hostile server's start give up after this.
  @raw_ms 5_000

  @doc "The vector files this module runs."
  def files, do: @files

  @doc "`:ok`, or `{:error, why}` naming the environment variable `file` needs and `env` lacks."
  def missing(file, env) do
    case Enum.reject(Map.get(@needs, file, []), &(env[&1] not in [nil, ""])) do
      [] ->
        :ok

      vars ->
        {:error, "#{Enum.join(vars, " and ")} not set (spec/vectors/README.md, hostile_*.json)"}
    end
  end

  @doc "`[{name, check}]` for the document of `file`, read from the directory `dir`, with servers from `env`."
  def cases("hostile_keys.json", doc, _dir, env) do
    sentinel = get(doc, "sentinel")

    ctx = %{
      entry: hex(get(doc, "entry_hex")),
      sentinel: {get(sentinel, "key"), get(sentinel, "value")},
      memcached: env["LARDER_CONFORMANCE_MEMCACHED"],
      redis: env["LARDER_CONFORMANCE_REDIS"]
    }

    for v <- get(doc, "cases"), do: {get(v, "name"), fn -> key_case(v, ctx) end}
  end

  def cases("hostile_pages.json", doc, _dir, _env),
    do: for(v <- get(doc, "cases"), do: {get(v, "name"), fn -> page_case(v) end})

  def cases("hostile_files.json", doc, dir, _env) do
    ctx = %{entry: hex(get(doc, "entry_hex")), tree: Path.join(dir, "hostile_tree.py")}
    for v <- get(doc, "cases"), do: {get(v, "name"), fn -> file_case(v, ctx) end}
  end

  def cases("hostile_replies.json", doc, _dir, env) do
    ctx = %{entry: hex(get(doc, "entry_hex")), bin: env["LARDER_HOSTILE"]}
    for v <- get(doc, "cases"), do: {get(v, "name"), fn -> reply_case(v, ctx) end}
  end

  # ------------------------------------------------------------------------------------------ hostile_keys

  defp key_case(v, ctx) do
    key = hex(get(v, "key_hex"))
    tmp = tmp_dir("keys")

    try do
      for kind <- @key_stores do
        with_store(kind, tmp, ctx, fn store ->
          try do
            if kind in [:memcached, :redis] do
              flush(kind, ctx)

              ok(
                :ok,
                Store.set(store, elem(ctx.sentinel, 0), elem(ctx.sentinel, 1)),
                "sentinel set"
              )
            end

            case get(v, "outcome") do
              "refused" -> refused(kind, store, key, ctx)
              "stored" -> stored(kind, store, key, hex(get(v, "wire_hex")), ctx, tmp)
              other -> fail("unknown outcome #{inspect(other)}")
            end
          rescue
            e in Mismatch -> reraise Mismatch, [message: "#{kind}: #{e.message}"], __STACKTRACE__
          end
        end)
      end
    after
      File.rm_rf(tmp)
    end

    :ok
  end

  defp with_store(:memory, _tmp, _ctx, fun) do
    name = :"larder_conformance_#{System.unique_integer([:positive])}"
    {:ok, pid} = Larder.Stores.Memory.start_link(name: name)

    try do
      fun.(Larder.Stores.Memory.handle(name))
    after
      Process.unlink(pid)
      GenServer.stop(pid)
    end
  end

  defp with_store(:sqlite, tmp, _ctx, fun) do
    store = open!("sqlite://#{tmp}/keys.db")

    try do
      fun.(store)
    after
      # The file's connection (started on first use) goes with the case's directory.
      for {pid, _} <- Registry.lookup(Larder.Pools, store.ref.id), do: GenServer.stop(pid)
    end
  end

  defp with_store(:file, tmp, _ctx, fun), do: fun.(open!("file://#{tmp}/files"))

  defp with_store(kind, _tmp, ctx, fun) when kind in [:memcached, :redis],
    do: fun.(open!("#{kind}://#{Map.fetch!(ctx, kind)}?timeout=5s&pool=1"))

  defp open!(url) do
    case Larder.Stores.open(url) do
      {:ok, store} -> store
      other -> fail("opening #{url}: #{inspect(other)}")
    end
  end

  defp refused(kind, store, key, ctx) do
    results = [
      get: Store.get(store, key),
      get_many: Store.get_many(store, [key]),
      set: Store.set(store, key, ctx.entry),
      add: Store.add(store, key, ctx.entry),
      delete: Store.delete(store, key),
      delete_if: Store.delete_if(store, key, ctx.entry),
      incr: Store.incr(store, key, 1)
    ]

    results =
      if key == "", do: results, else: results ++ [purge_prefix: Store.purge_prefix(store, key)]

    for {op, result} <- results do
      unless match?({:error, %StoreError{kind: :invalid_key}}, result),
        do: fail("#{op} of a refused key gave #{short(result)}, not invalid_key")
    end

    sentinel_intact(kind, ctx, 1)
  end

  defp stored(kind, store, key, wire, ctx, tmp) do
    entry = ctx.entry
    ok(:ok, Store.set(store, key, entry), "set")
    ok({:ok, entry}, Store.get(store, key), "get")
    probe(kind, wire, {:ok, entry}, tmp, ctx, "after set")
    sentinel_intact(kind, ctx, 2)
    ok({:ok, true}, Store.delete(store, key), "delete")
    probe(kind, wire, :miss, tmp, ctx, "after delete")
    ok(:miss, Store.get(store, key), "get after delete")
    sentinel_intact(kind, ctx, 1)
  end

  # What the server or directory holds under the wire bytes.
  defp probe(:memcached, wire, want, _tmp, ctx, what),
    do: ok(want, mg(ctx.memcached, wire), "raw mg of the wire bytes #{what}")

  defp probe(:redis, wire, want, _tmp, ctx, what),
    do: ok(want, resp(ctx.redis, ["GET", wire]), "raw GET of the wire bytes #{what}")

  defp probe(:file, wire, want, tmp, _ctx, what) do
    h = Base.encode16(:crypto.hash(:sha256, wire), case: :lower)
    path = Path.join([tmp, "files", binary_part(h, 0, 2), binary_part(h, 2, 2), h])

    got =
      case File.read(path) do
        {:ok, <<"LDR1", _expires::64, n::little-16, key::binary-size(n), _::binary>>} ->
          {:key, key}

        {:ok, other} ->
          {:not_a_store_file, byte_size(other)}

        {:error, :enoent} ->
          :miss

        {:error, e} ->
          {:error, e}
      end

    case want do
      :miss -> ok(:miss, got, "the file of the wire bytes #{what}")
      {:ok, _} -> ok({:key, wire}, got, "the key in the file of the wire bytes #{what}")
    end
  end

  defp probe(_local, _wire, _want, _tmp, _ctx, _what), do: :ok

  defp sentinel_intact(:memcached, %{sentinel: {k, val}} = ctx, _n),
    do: ok({:ok, val}, mg(ctx.memcached, k), "the sentinel (raw mg)")

  defp sentinel_intact(:redis, %{sentinel: {k, val}} = ctx, n) do
    ok({:ok, val}, resp(ctx.redis, ["GET", k]), "the sentinel (raw GET)")
    ok({:integer, n}, resp(ctx.redis, ["DBSIZE"]), "DBSIZE")
  end

  defp sentinel_intact(_local, _ctx, _n), do: :ok

  defp flush(:memcached, ctx), do: ok(:ok, memcached(ctx.memcached, "flush_all\r\n"), "flush_all")
  defp flush(:redis, ctx), do: ok({:status, "OK"}, resp(ctx.redis, ["FLUSHALL"]), "FLUSHALL")

  # ---------------------------------------------------------- raw probes: this module's own protocol code

  defp mg(addr, key), do: memcached(addr, ["mg ", key, " v\r\n"])

  # One memcached request; its reply: :ok (OK), :miss (EN), {:ok, value} (VA), or {:other, line}.
  defp memcached(addr, request) do
    raw(addr, request, fn s, deadline ->
      case read_line(s, "", deadline) do
        {"OK", rest} ->
          {:ok, rest}

        {"EN", rest} ->
          {:miss, rest}

        {"VA " <> tail, rest} ->
          [n | _] = String.split(tail, " ")
          size = String.to_integer(n)
          {data, rest} = read_exactly(s, rest, size + 2, deadline)
          <<value::binary-size(size), "\r\n">> = data
          {{:ok, value}, rest}

        {line, rest} ->
          {{:other, line}, rest}
      end
    end)
  end

  # One RESP command (bulk strings of exactly the given bytes); its reply: {:status, s}, {:integer, n}, :miss (a
  # null bulk), {:ok, bytes} or {:error_reply, line}.
  defp resp(addr, args) do
    request = [
      "*#{length(args)}\r\n" | for(a <- args, do: ["$#{byte_size(a)}\r\n", a, "\r\n"])
    ]

    raw(addr, request, fn s, deadline ->
      case read_line(s, "", deadline) do
        {"+" <> status, rest} ->
          {{:status, status}, rest}

        {":" <> n, rest} ->
          {{:integer, String.to_integer(n)}, rest}

        {"$-1", rest} ->
          {:miss, rest}

        {"$" <> n, rest} ->
          size = String.to_integer(n)
          {data, rest} = read_exactly(s, rest, size + 2, deadline)
          <<value::binary-size(size), "\r\n">> = data
          {{:ok, value}, rest}

        {line, rest} ->
          {{:error_reply, line}, rest}
      end
    end)
  end

  defp raw(addr, request, read) do
    {host, port} = split_addr(addr)
    deadline = System.monotonic_time(:millisecond) + @raw_ms

    case :gen_tcp.connect(host, port, [:binary, active: false], @raw_ms) do
      {:ok, s} ->
        try do
          :ok = :gen_tcp.send(s, request)
          {reply, _} = read.(s, deadline)
          reply
        after
          :gen_tcp.close(s)
        end

      {:error, e} ->
        fail("raw probe: cannot connect to #{addr}: #{inspect(e)}")
    end
  end

  defp split_addr(addr) do
    [port, host] =
      addr |> String.split(":") |> Enum.reverse() |> then(fn [p | h] -> [p, Enum.reverse(h)] end)

    {host
     |> Enum.join(":")
     |> String.trim_leading("[")
     |> String.trim_trailing("]")
     |> String.to_charlist(), String.to_integer(port)}
  end

  defp read_line(s, buf, deadline) do
    case :binary.split(buf, "\r\n") do
      [line, rest] -> {line, rest}
      [_] -> read_line(s, buf <> recv(s, deadline), deadline)
    end
  end

  defp read_exactly(_s, buf, n, _deadline) when byte_size(buf) >= n,
    do: {binary_part(buf, 0, n), binary_part(buf, n, byte_size(buf) - n)}

  defp read_exactly(s, buf, n, deadline),
    do: read_exactly(s, buf <> recv(s, deadline), n, deadline)

  defp recv(s, deadline) do
    case :gen_tcp.recv(s, 0, max(deadline - System.monotonic_time(:millisecond), 1)) do
      {:ok, data} -> data
      {:error, e} -> fail("raw probe: #{inspect(e)}")
    end
  end

  # ----------------------------------------------------------------------------------------- hostile_pages

  defp page_case(v) do
    o = get(v, "options") || %{}
    r = get(v, "request")

    opts =
      for {opt, field} <- [site: "site", trusted_proxies: "trusted_proxies", scheme: "scheme"],
          value = get(o, field),
          value != nil,
          do: {opt, value}

    # Deriving a key touches no store: a memory handle that is never started.
    {:ok, pages} = Pages.new(Larder.Stores.Memory.handle(:larder_conformance_unused), opts)
    headers = for [name, value] <- get(r, "headers"), do: {name, value}

    # As Larder.Pages.HTTPD builds it: the (first) Host field, or none.
    authority =
      Enum.find_value(headers, "", fn {n, val} -> if String.downcase(n) == "host", do: val end)

    request = %Pages.Request{
      method: "GET",
      authority: authority,
      target: get(r, "target"),
      scheme: get(r, "scheme"),
      headers: headers,
      peer: get(r, "peer")
    }

    expected = get(v, "expected")

    want =
      case get(expected, "key") do
        nil -> {:not_stored, get(expected, "not_stored")}
        key -> {:ok, key}
      end

    ok(want, Pages.key(pages, request), "page key")
  end

  # ----------------------------------------------------------------------------------------- hostile_files

  defp file_case(v, ctx) do
    name = get(v, "name")
    base = tmp_dir("files")
    root = Path.join(base, "root")
    outside = Path.join(base, "outside")
    File.mkdir_p!(root)
    File.mkdir_p!(outside)

    try do
      tree(ctx, "plant", name, root, outside)
      query = get(v, "url_query") || ""
      url = "file://#{root}" <> if(query == "", do: "", else: "?" <> query)

      {store, ops} =
        case get(v, "operations") do
          [first | rest] = all ->
            if get(first, "op") == "open",
              do: {open_file(url, get(first, "expect")), rest},
              else: {open_file(url, "ok"), all}

          [] ->
            {open_file(url, "ok"), []}
        end

      for {op, i} <- Enum.with_index(ops) do
        if store == nil, do: fail("operation #{i} after an open that failed")
        file_op(store, op, ctx.entry, "operation #{i} (#{get(op, "op")})")
      end

      tree(ctx, "check", name, root, outside)
    after
      File.rm_rf(base)
    end

    :ok
  end

  defp tree(ctx, command, name, root, outside) do
    case System.cmd("python3", [ctx.tree, command, name, root, outside], stderr_to_stdout: true) do
      {_, 0} -> :ok
      {out, code} -> fail("hostile_tree.py #{command} exited #{code}: #{String.trim(out)}")
    end
  end

  defp open_file(url, "ok") do
    case bounded(fn -> Larder.Stores.open(url) end) do
      {:ok, {:ok, store}} -> store
      other -> fail("open: expected ok, got #{short(other)}")
    end
  end

  defp open_file(url, "url_error") do
    case bounded(fn -> Larder.Stores.open(url) end) do
      {:ok, {:error, %StoreError{kind: :url}}} -> nil
      other -> fail("open: expected url_error, got #{short(other)}")
    end
  end

  defp open_file(_url, other), do: fail("open: unknown expect #{inspect(other)}")

  defp file_op(store, op, entry, what) do
    key = get(op, "key")
    expect = get(op, "expect")

    call =
      case get(op, "op") do
        "get" -> fn -> Store.get(store, key) end
        "get_many" -> fn -> Store.get_many(store, [key]) end
        "set" -> fn -> Store.set(store, key, entry) end
        "add" -> fn -> Store.add(store, key, entry) end
        "delete" -> fn -> Store.delete(store, key) end
        "delete_if" -> fn -> Store.delete_if(store, key, entry) end
        "purge_prefix" -> fn -> Store.purge_prefix(store, get(op, "prefix")) end
        "purge_tag" -> fn -> Store.purge_tag(store, get(op, "tag")) end
        other -> fail("#{what}: unknown operation #{inspect(other)}")
      end

    case bounded(call) do
      {:ok, result} ->
        unless file_expected?(get(op, "op"), expect, result, key, entry),
          do: fail("#{what}: expected #{expect}, got #{short(result)}")

      :timeout ->
        fail("#{what}: did not return within #{@file_op_ms} ms")

      {:crash, e} ->
        fail("#{what}: crashed: #{e}")
    end
  end

  defp file_expected?("get", "miss", result, _key, _entry), do: result == :miss
  defp file_expected?("get", "hit", result, _key, entry), do: result == {:ok, entry}
  defp file_expected?("get_many", "miss", result, _key, _entry), do: result == {:ok, %{}}

  defp file_expected?("get_many", "hit", result, key, entry),
    do: result == {:ok, %{key => entry}}

  defp file_expected?("set", "ok", result, _key, _entry), do: result == :ok
  defp file_expected?("add", "ok", result, _key, _entry), do: result == {:ok, true}

  defp file_expected?(op, "error", result, _key, _entry) when op in ["set", "add"],
    do: store_error?(result)

  defp file_expected?("delete", "deleted", result, _key, _entry), do: result == {:ok, true}

  defp file_expected?(op, "noop", result, _key, _entry) when op in ["delete", "delete_if"],
    do: result == {:ok, false}

  defp file_expected?(op, "ok", result, _key, _entry) when op in ["purge_prefix", "purge_tag"],
    do: match?({:ok, _}, result)

  defp file_expected?(op, expect, _result, _key, _entry),
    do: fail("unknown expect #{inspect(expect)} for #{op}")

  # ---------------------------------------------------------------------------------------- hostile_replies

  @reply_ops ~w(get get_many set add incr delete delete_if purge_tag purge_prefix)

  defp reply_case(v, ctx) do
    within = get(v, "within_ms")

    for op <- get(v, "operations") do
      unless op in @reply_ops, do: fail("unknown operation #{inspect(op)}")

      {port, addr} =
        hostile(ctx.bin, get(v, "protocol"), get(v, "behaviour"), get(v, "server_args"))

      try do
        query = get(v, "url_query") || ""

        store =
          open!("#{get(v, "protocol")}://#{addr}" <> if(query == "", do: "", else: "?" <> query))

        started = System.monotonic_time(:millisecond)
        result = bounded(fn -> reply_op(op, store, ctx.entry) end, within + 5_000)
        took = System.monotonic_time(:millisecond) - started

        case result do
          {:ok, r} ->
            unless store_error?(r), do: fail("#{op}: expected the store's error, got #{short(r)}")
            if took > within, do: fail("#{op}: failed after #{took} ms, not within #{within} ms")

          :timeout ->
            fail("#{op}: no answer within #{within + 5_000} ms")

          {:crash, e} ->
            fail("#{op}: crashed: #{e}")
        end
      after
        stop_hostile(port)
      end
    end

    :ok
  end

  defp reply_op("get", s, _entry), do: Store.get(s, "k1")
  defp reply_op("get_many", s, _entry), do: Store.get_many(s, ["k1", "k2", "k3"])
  defp reply_op("set", s, entry), do: Store.set(s, "k1", entry)
  defp reply_op("add", s, entry), do: Store.add(s, "k1", entry)
  defp reply_op("incr", s, _entry), do: Store.incr(s, "k1", 1)
  defp reply_op("delete", s, _entry), do: Store.delete(s, "k1")
  defp reply_op("delete_if", s, entry), do: Store.delete_if(s, "k1", entry)
  defp reply_op("purge_tag", s, _entry), do: Store.purge_tag(s, "t")
  defp reply_op("purge_prefix", s, _entry), do: Store.purge_prefix(s, "k")

  # larder-hostile prints its address, then serves until its standard input closes (when the port is closed).
  defp hostile(bin, protocol, behaviour, args) do
    port =
      try do
        Port.open({:spawn_executable, bin}, [
          :binary,
          {:line, 4096},
          args: [protocol, behaviour | args || []]
        ])
      rescue
        e -> fail("cannot start #{bin}: #{Exception.message(e)}")
      end

    receive do
      {^port, {:data, {:eol, "127.0.0.1:" <> _ = addr}}} -> {port, addr}
    after
      @raw_ms ->
        stop_hostile(port)
        fail("#{bin} #{protocol} #{behaviour} printed no address")
    end
  end

  defp stop_hostile(port) do
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

  # ------------------------------------------------------------------------------------------------ helpers

  defp store_error?({:error, %StoreError{kind: kind}}), do: kind != :invalid_key
  defp store_error?(_), do: false

  # `fun` in a process of its own, bounded: {:ok, result}, :timeout or {:crash, message}.
  defp bounded(fun, ms \\ @file_op_ms) do
    task =
      Task.async(fn ->
        try do
          {:ok, fun.()}
        rescue
          e -> {:crash, Exception.format(:error, e, __STACKTRACE__)}
        catch
          kind, value -> {:crash, "#{kind}: #{inspect(value)}"}
        end
      end)

    case Task.yield(task, ms) || Task.shutdown(task, :brutal_kill) do
      {:ok, result} -> result
      _ -> :timeout
    end
  end

  defp tmp_dir(what) do
    dir =
      Path.join(
        System.tmp_dir!(),
        "larder-ex-hostile-#{what}-#{System.os_time(:nanosecond)}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)
    dir
  end

  defp ok(want, got, what) do
    unless want == got, do: fail("#{what}: expected #{short(want)}, got #{short(got)}")
    :ok
  end

  defp short(term), do: inspect(term, limit: 8, printable_limit: 120)

  defp fail(message), do: raise(Mismatch, message)

  defp get(doc, key), do: Larder.Conformance.get(doc, key)
  defp hex(s), do: Base.decode16!(s, case: :mixed)
end
