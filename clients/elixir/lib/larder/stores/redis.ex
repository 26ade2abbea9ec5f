defmodule Larder.Stores.Redis do
  @moduledoc """
  `redis://[user:pass@]host:6379/0?prefix=…&timeout=250ms&max_value=64M` (spec/STORES.md §5): one Redis server
  over this client's own RESP (`Larder.Stores.RESP`, bounded). Values are `SET … PXAT`; `add` is `NX`; the atomic
  operations are the Lua scripts of spec/redis, read from there at compile time and run by `EVALSHA` (falling
  back to `EVAL`); tagged entries join a set per tag (`tag.lua`), which `purge_tag` reads with `SSCAN`;
  `purge_prefix` scans with `SCAN … MATCH`. Purges are exact. A server that fails `failures` times in a row is
  ejected for `retry_after`: requests fail at once until it is tried again. Redis Cluster is not done yet.
  """

  @behaviour Larder.Store

  alias Larder.{Keys, Store, StoreError}
  alias Larder.Stores.{Conn, Health, Pool, RESP}

  @scripts_dir Path.expand("../../../../../spec/redis", __DIR__)
  for name <- ~w(delete_if incr tag) do
    path = Path.join(@scripts_dir, name <> ".lua")
    @external_resource path
    source = File.read!(path)

    def script(unquote(String.to_atom(name))),
      do: {unquote(source), unquote(Base.encode16(:crypto.hash(:sha, source), case: :lower))}
  end

  defstruct [
    :id,
    :host,
    :port,
    :db,
    :user,
    :password,
    :prefix,
    :timeout,
    :connect_timeout,
    :pool,
    :max_value,
    :failures,
    :retry_after
  ]

  @backend "redis"
  # SCAN and SSCAN ask for this many members a call; Redis may return a few more (a bucket's chain), so a reply may
  # hold up to 1,024 beyond it (issue 32, decision (d)).
  @scan_count 1000
  # What a reply may take beyond its values: a status, an integer, an error line (each line ends within 8 KiB).
  @allowance 16 * 1024
  # A bulk string's own framing ($<length> CR LF … CR LF).
  @framing 32

  @doc "A store handle for a parsed `redis://` URL. Raises ArgumentError for a bad or unknown option."
  def open(%Store.URL{} = url) do
    [{host, port}] =
      case url.hosts do
        [one] ->
          [one]

        _ ->
          raise ArgumentError,
                "#{Store.URL.redact(url)}: redis:// takes one server (redis+cluster:// is not done in Elixir yet)"
      end

    db =
      case String.trim_leading(url.path, "/") do
        "" ->
          0

        d ->
          if d =~ ~r/\A\d+\z/,
            do: String.to_integer(d),
            else:
              raise(
                ArgumentError,
                "#{Store.URL.redact(url)}: database #{inspect(d)} is not a number"
              )
      end

    {prefix, url} = Store.URL.take_prefix(url)
    {timeout, url} = Store.URL.take_duration(url, "timeout", 250)
    {connect_timeout, url} = Store.URL.take_duration(url, "connect_timeout", 500)
    {pool, url} = Store.URL.take_integer(url, "pool", 4)
    {max_value, url} = Store.URL.take_size(url, "max_value", 64 * 1024 * 1024)
    {failures, url} = Store.URL.take_integer(url, "failures", 2)
    {retry_after, url} = Store.URL.take_duration(url, "retry_after", 1000)
    Store.URL.finish(url)

    %Store{
      module: __MODULE__,
      backend: @backend,
      ref: %__MODULE__{
        id: {__MODULE__, url.text},
        host: host,
        port: port,
        db: db,
        user: url.user,
        password: url.password,
        prefix: prefix,
        timeout: timeout,
        connect_timeout: connect_timeout,
        pool: pool,
        max_value: max_value,
        failures: max(failures, 1),
        retry_after: retry_after
      }
    }
  end

  @impl Larder.Store
  def get(r, key) do
    with :ok <- StoreError.check_key(@backend, key),
         {:ok, v} <- call(r, [["GET", skey(r, key)]], value_bound(r)) do
      case v do
        [nil] -> :miss
        [b] when is_binary(b) -> {:ok, b}
        _ -> malformed(r)
      end
    end
  end

  @impl Larder.Store
  def get_many(_r, []), do: {:ok, %{}}

  def get_many(r, keys) do
    keys = Enum.uniq(keys)

    with :ok <- StoreError.check_keys(@backend, keys),
         {:ok, [values]} when is_list(values) and length(values) == length(keys) <-
           call(r, [["MGET" | Enum.map(keys, &skey(r, &1))]], values_bound(r, length(keys))) do
      {:ok, for({k, v} <- Enum.zip(keys, values), is_binary(v), into: %{}, do: {k, v})}
    else
      {:ok, _} -> malformed(r)
      e -> e
    end
  end

  @impl Larder.Store
  def set(r, key, value, ttl) do
    with {:ok, _} <- write(r, key, value, ttl, []), do: :ok
  end

  @impl Larder.Store
  def add(r, key, value, ttl) do
    case write(r, key, value, ttl, ["NX"]) do
      {:ok, :past} -> {:ok, false}
      {:ok, reply} -> {:ok, reply == "OK"}
      e -> e
    end
  end

  defp write(r, key, value, ttl, mode) do
    with :ok <- StoreError.check_key(@backend, key) do
      if byte_size(value) > r.max_value do
        {:error,
         StoreError.new(
           @backend,
           :too_large,
           "#{inspect(key)}: #{byte_size(value)} bytes; max_value is #{r.max_value}"
         )}
      else
        now = Store.now_ms()
        k = skey(r, key)

        case Store.expiry(value, ttl, now) do
          exp when exp != nil and exp <= now ->
            if mode == [] do
              with {:ok, _} <- call(r, [["DEL", k]], status_bound()), do: {:ok, :past}
            else
              {:ok, :past}
            end

          exp ->
            px = if exp, do: ["PXAT", Integer.to_string(exp)], else: []

            with {:ok, [reply]} <- call(r, [["SET", k, value | px ++ mode]], status_bound()),
                 :ok <- if(reply == "OK", do: tag(r, k, Store.entry_tags(value), exp), else: :ok) do
              checked_reply(r, reply, fn x -> x in ["OK", nil] end)
            end
        end
      end
    end
  end

  # Adds the stored key to each tag's set (tag.lua), after the SET. A tag that cannot be recorded would leave the
  # entry out of its purge, so the entry is deleted (as far as the server lets it be) and the write is the error.
  defp tag(_r, _k, [], _exp), do: :ok

  defp tag(r, k, tags, exp) do
    Enum.reduce_while(tags, :ok, fn t, :ok ->
      case script(r, :tag, [Keys.internal_key(r.prefix, "tag", t)], [
             k,
             Integer.to_string(exp || 0)
           ]) do
        {:ok, 1} ->
          {:cont, :ok}

        failed ->
          call(r, [["DEL", k]], status_bound())
          {:halt, with({:ok, _} <- failed, do: malformed(r))}
      end
    end)
  end

  @impl Larder.Store
  def delete(r, key) do
    with :ok <- StoreError.check_key(@backend, key),
         {:ok, [n]} <- call(r, [["DEL", skey(r, key)]], status_bound()) do
      checked_reply(r, n, &is_integer/1)
      |> then(fn
        {:ok, n} -> {:ok, n > 0}
        e -> e
      end)
    end
  end

  @impl Larder.Store
  def delete_if(r, key, expected) do
    with :ok <- StoreError.check_key(@backend, key),
         {:ok, n} <- script(r, :delete_if, [skey(r, key)], [expected]) do
      checked_reply(r, n, &is_integer/1)
      |> then(fn
        {:ok, n} -> {:ok, n > 0}
        e -> e
      end)
    end
  end

  @impl Larder.Store
  def incr(r, key, delta, ttl, create) do
    with :ok <- StoreError.check_key(@backend, key) do
      case script(r, :incr, [skey(r, key)], [
             Integer.to_string(delta),
             if(create, do: "1", else: "0"),
             Integer.to_string(ttl || 0)
           ]) do
        {:ok, nil} ->
          :missing

        {:ok, n} when is_integer(n) ->
          {:ok, n}

        {:ok, _} ->
          malformed(r)

        {:error, %StoreError{kind: :server, message: m}} = e ->
          if m =~ "not an integer",
            do:
              {:error,
               StoreError.new(
                 @backend,
                 :not_a_counter,
                 "#{inspect(key)} does not hold a counter",
                 name(r)
               )},
            else: e

        e ->
          e
      end
    end
  end

  @impl Larder.Store
  def purge_tag(r, tag) when is_binary(tag) do
    set_key = Keys.internal_key(r.prefix, "tag", tag)

    with {:ok, n} <-
           scan_delete(
             r,
             fn cursor -> ["SSCAN", set_key, cursor, "COUNT", Integer.to_string(@scan_count)] end,
             "0",
             0
           ),
         {:ok, _} <- call(r, [["DEL", set_key]], status_bound()) do
      {:ok, n}
    end
  end

  @impl Larder.Store
  def purge_prefix(r, prefix) do
    with :ok <- StoreError.check_prefix(@backend, prefix) do
      pattern = escape_glob(Keys.stored_key(r.prefix, "") <> prefix) <> "*"

      pattern =
        if r.prefix != "" and prefix == "", do: escape_glob(r.prefix) <> "*", else: pattern

      scan_delete(
        r,
        fn cursor ->
          ["SCAN", cursor, "MATCH", pattern, "COUNT", Integer.to_string(@scan_count)]
        end,
        "0",
        0
      )
    end
  end

  defp escape_glob(text), do: String.replace(text, ~r/[*?\[\]\\]/, "\\\\\\0")

  defp scan_delete(r, command, cursor, count) do
    with {:ok, [reply]} <- call(r, [command.(cursor)], scan_bound(r)) do
      case reply do
        [next, members] when is_binary(next) and is_list(members) ->
          deleted =
            case Enum.filter(members, &is_binary/1) do
              [] -> {:ok, [0]}
              ms -> call(r, [["DEL" | ms]], status_bound())
            end

          with {:ok, [n]} when is_integer(n) <- deleted do
            if next == "0", do: {:ok, count + n}, else: scan_delete(r, command, next, count + n)
          else
            {:ok, _} -> malformed(r)
            e -> e
          end

        _ ->
          malformed(r)
      end
    end
  end

  @impl Larder.Store
  def clear(%__MODULE__{prefix: ""} = r) do
    with {:ok, ["OK"]} <- call(r, [["FLUSHDB"]], status_bound()), do: :ok
  end

  def clear(r), do: with({:ok, _} <- purge_prefix(r, ""), do: :ok)

  defp skey(r, key), do: Keys.stored_key(r.prefix, key)

  # EVALSHA, then EVAL when the server does not have the script yet.
  defp script(r, name, keys, args) do
    {source, sha} = script(name)
    n = Integer.to_string(length(keys))

    case call(r, [["EVALSHA", sha, n | keys ++ args]], status_bound()) do
      {:ok, [{:redis_error, "NOSCRIPT" <> _}]} ->
        call(r, [["EVAL", source, n | keys ++ args]], status_bound()) |> single_reply(r)

      other ->
        single_reply(other, r)
    end
  end

  defp single_reply({:ok, [{:redis_error, e}]}, r),
    do: {:error, StoreError.new(@backend, :server, e, name(r))}

  defp single_reply({:ok, [v]}, _r), do: {:ok, v}
  defp single_reply(e, _r), do: e

  defp checked_reply(r, {:redis_error, e}, _),
    do: {:error, StoreError.new(@backend, :server, e, name(r))}

  defp checked_reply(r, reply, ok?), do: if(ok?.(reply), do: {:ok, reply}, else: malformed(r))

  defp malformed(r),
    do: {:error, StoreError.new(@backend, :malformed, "a reply of the wrong type", name(r))}

  defp name(r), do: "#{r.host}:#{r.port}"

  # What each command's whole reply may hold (spec/STORES.md §2; issue 32, decision (d)): its values, each within
  # max_value, its bytes and its elements (the reply itself and every array member at any depth).
  #
  # GET: one value.
  defp value_bound(r), do: RESP.bound(r.max_value, r.max_value + @allowance, 1)

  # MGET of n keys: an array of n values.
  defp values_bound(r, n),
    do: RESP.bound(r.max_value, n * (r.max_value + @framing) + @allowance, 1 + n)

  # SET, DEL, FLUSHDB, AUTH, SELECT and larder's scripts (spec/redis: an integer, nil or OK): one status, integer or
  # error, never a value or an array.
  defp status_bound, do: RESP.bound(@allowance, @allowance, 1)

  # SCAN and SSCAN: a cursor and an array of keys (which Redis lets be up to max_value here).
  defp scan_bound(r),
    do: RESP.bound(r.max_value, r.max_value + @allowance, 3 + @scan_count + 1024)

  # Pipelines `commands` on one connection and reads one reply each, each within `bound`.
  defp call(r, commands, bound) do
    now = Store.now_ms()

    # After retry_after one request probes the server; while it is out, the others still fail at once (§1).
    if Health.admit(r.id, 0, now, r.retry_after + r.timeout) == :ejected do
      Health.refused(r.id, 0)

      {:error,
       StoreError.new(
         @backend,
         :unavailable,
         "ejected after repeated failures; tried again after retry_after",
         name(r)
       )}
    else
      deadline = System.monotonic_time(:millisecond) + r.timeout
      pool = Pool.for(r.id, 0, r.pool)

      result =
        with {:ok, conn} <- Conn.open(pool, r.host, r.port, deadline, r.connect_timeout) do
          case exchange(r, conn, commands, bound) do
            {:ok, replies, conn} ->
              if Conn.clean?(conn),
                do: Pool.checkin(pool, conn.socket),
                else: Pool.discard(pool, conn.socket)

              {:ok, replies}

            {:error, _, _} = e ->
              Pool.discard(pool, conn.socket)
              e
          end
        end

      case result do
        {:ok, replies} ->
          Health.success(r.id, 0)
          {:ok, replies}

        {:error, kind, message} ->
          Health.failure(r.id, 0, r.failures, r.retry_after, Store.now_ms())
          {:error, StoreError.new(@backend, kind, message, name(r))}
      end
    end
  end

  defp exchange(r, conn, commands, bound) do
    setup =
      if conn.fresh do
        auth =
          if r.password,
            do: [["AUTH" | if(r.user, do: [r.user], else: []) ++ [r.password]]],
            else: []

        auth ++ if(r.db != 0, do: [["SELECT", Integer.to_string(r.db)]], else: [])
      else
        []
      end

    with {:ok, conn} <- Conn.send_all(conn, Enum.map(setup ++ commands, &RESP.command/1)),
         {:ok, setup_replies, conn} <- replies(conn, length(setup), status_bound(), []),
         :ok <- setup_ok(setup_replies),
         {:ok, replies, conn} <- replies(conn, length(commands), bound, []) do
      {:ok, replies, %{conn | fresh: false}}
    end
  end

  defp setup_ok(replies) do
    case Enum.find(replies, &match?({:redis_error, _}, &1)) do
      nil ->
        :ok

      {:redis_error, e} ->
        {:error, :unavailable, "the server refused the connection's setup: #{e}"}
    end
  end

  defp replies(conn, 0, _, acc), do: {:ok, Enum.reverse(acc), conn}

  defp replies(conn, n, bound, acc) do
    with {:ok, reply, conn} <- RESP.read(conn, bound),
         do: replies(conn, n - 1, bound, [reply | acc])
  end
end
