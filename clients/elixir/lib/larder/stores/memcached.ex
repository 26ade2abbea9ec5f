defmodule Larder.Stores.Memcached do
  @moduledoc """
  `memcached://h1:11211,h2:11211?prefix=…&timeout=250ms&…` (spec/STORES.md §4): memcached's meta protocol over
  `:gen_tcp`, this client's own (no Erlang memcached library speaks it, and every byte a server sends is bounded
  here: `Larder.Stores.Conn`).

  Keys go to servers by ketama (`Larder.Ring`, the continuum every language computes); a multi-get sends one
  `mg <key> v` per key to each server in one write and pairs the replies by position. Servers that fail
  `failures` times in a row are ejected for `retry_after` and their keys move to the others (§4.3); the request
  that caused it is retried once on the key's new server. Purges write records (§4.4): a tag's purge time, and the
  prefix list updated with CAS; reads check them, so `purge_tag` and `purge_prefix` answer `{:ok, :recorded}`.
  """

  @behaviour Larder.Store

  alias Larder.{Header, Keys, Ring, Store, StoreError}
  alias Larder.Stores.{Conn, Health, Pool}

  defstruct [
    :id,
    :servers,
    :prefix,
    :timeout,
    :connect_timeout,
    :pool,
    :failures,
    :retry_after,
    :max_item,
    :prefix_purge,
    :purge_skew,
    :purge_retention
  ]

  @backend "memcached"
  @item_overhead 50
  @thirty_days 2_592_000
  @max_prefix_lines 1000
  # What one reply may take beyond a value: its line (which ends within 8 KiB) and the value's CR LF. Every reply
  # is one line, or one line and one value within max_item, one per request (issue 32, decision (d)).
  @allowance 16 * 1024

  @doc "A store handle for a parsed `memcached://` URL. Raises ArgumentError for a bad or unknown option."
  def open(%Store.URL{} = url) do
    if url.hosts == [], do: raise(ArgumentError, "#{Store.URL.redact(url)}: no server")
    {prefix, url} = Store.URL.take_prefix(url)
    {timeout, url} = Store.URL.take_duration(url, "timeout", 250)
    {connect_timeout, url} = Store.URL.take_duration(url, "connect_timeout", 500)
    {pool, url} = Store.URL.take_integer(url, "pool", 2)
    {failures, url} = Store.URL.take_integer(url, "failures", 2)
    {retry_after, url} = Store.URL.take_duration(url, "retry_after", 5000)
    {max_item, url} = Store.URL.take_size(url, "max_item", 1024 * 1024)
    {prefix_purge, url} = Store.URL.take_bool(url, "prefix_purge", true)
    {skew, url} = Store.URL.take_duration(url, "purge_skew", 1000)
    {retention, url} = Store.URL.take_duration(url, "purge_retention", 30 * 86_400_000)
    {weights, url} = Store.URL.take(url, "weights")
    Store.URL.finish(url)

    weights =
      case weights do
        nil -> List.duplicate(1, length(url.hosts))
        w -> parse_weights(url, w)
      end

    if length(weights) != length(url.hosts),
      do:
        raise(
          ArgumentError,
          "#{Store.URL.redact(url)}: weights names #{length(weights)} servers, the URL #{length(url.hosts)}"
        )

    servers = Enum.zip_with(url.hosts, weights, fn {h, p}, w -> {h, p, w} end)

    %Store{
      module: __MODULE__,
      backend: @backend,
      ref: %__MODULE__{
        id: {__MODULE__, url.text},
        servers: List.to_tuple(servers),
        prefix: prefix,
        timeout: timeout,
        connect_timeout: connect_timeout,
        pool: pool,
        failures: max(failures, 1),
        retry_after: retry_after,
        max_item: max_item,
        prefix_purge: prefix_purge,
        purge_skew: skew,
        purge_retention: retention
      }
    }
  end

  defp parse_weights(url, text) do
    for w <- String.split(text, ",") do
      case Integer.parse(w) do
        {n, ""} when n > 0 ->
          n

        _ ->
          raise ArgumentError,
                "#{Store.URL.redact(url)}: option weights: #{inspect(text)} is not a list of positive integers"
      end
    end
  end

  # ---------------------------------------------------------------------------------------- reads

  @impl Larder.Store
  def get(m, key) do
    with :ok <- StoreError.check_key(@backend, key),
         {:ok, found} <- checked_get(m, [key]) do
      case found do
        %{^key => v} -> {:ok, v}
        _ -> :miss
      end
    end
  end

  @impl Larder.Store
  def get_many(m, keys) do
    with :ok <- StoreError.check_keys(@backend, keys), do: checked_get(m, Enum.uniq(keys))
  end

  # The values of `keys`, with purge records checked (§4.4): the keys and the prefix list in one round trip, then
  # the tag records of the entries that have tags.
  defp checked_get(m, keys) do
    stored = Map.new(keys, &{&1, Keys.stored_key(m.prefix, &1)})
    plist = prefixes_key(m)
    wanted = Map.values(stored) ++ if(m.prefix_purge, do: [plist], else: [])

    with {:ok, raw} <- raw_many(m, Enum.uniq(wanted)) do
      lines = if m.prefix_purge, do: prefix_lines(Map.get(raw, plist, "")), else: []

      found =
        for {key, skey} <- stored, Map.has_key?(raw, skey), into: %{} do
          {key, raw[skey]}
        end

      headers = for {k, v} <- found, {:ok, h} <- [Header.read(v)], into: %{}, do: {k, h}
      tags = headers |> Map.values() |> Enum.flat_map(& &1.tags) |> Enum.uniq()
      tag_keys = Map.new(tags, &{&1, Keys.internal_key(m.prefix, "tag", &1)})

      records =
        case tags do
          [] -> {:ok, %{}}
          _ -> raw_many(m, Map.values(tag_keys))
        end

      with {:ok, records} <- records do
        purged_at = fn tag -> parse_ms(Map.get(records, tag_keys[tag])) end

        {:ok,
         Map.reject(found, fn {key, _} ->
           case headers[key] do
             nil -> false
             h -> purged?(m, key, h, lines, purged_at)
           end
         end)}
      end
    end
  end

  defp purged?(m, key, h, lines, purged_at) do
    c = h.created_at

    Enum.any?(lines, fn {t, p} -> String.starts_with?(key, p) and c <= t + m.purge_skew end) or
      Enum.any?(h.tags, fn tag ->
        case purged_at.(tag) do
          nil -> false
          t -> c <= t + m.purge_skew
        end
      end)
  end

  defp parse_ms(nil), do: nil

  defp parse_ms(text) do
    case Integer.parse(String.trim_trailing(text)) do
      {n, ""} -> n
      _ -> nil
    end
  end

  defp prefix_lines(text) do
    for line <- String.split(text, "\n", trim: true),
        [t, p] <- [String.split(line, " ", parts: 2)],
        {ms, ""} <- [Integer.parse(t)],
        do: {ms, p}
  end

  defp prefixes_key(m), do: Keys.internal_key(m.prefix, "prefixes", "")

  # Raw values of stored keys, grouped by server, pipelined: `{:ok, %{stored_key => bytes}}`.
  defp raw_many(m, skeys) do
    now = Store.now_ms()

    with {:ok, groups} <- route(m, skeys, now) do
      Enum.reduce_while(groups, {:ok, %{}}, fn {i, ks}, {:ok, acc} ->
        case on_server(m, i, &multi_get(&1, m, ks), true, fn -> raw_many(m, ks) end) do
          {:ok, found} -> {:cont, {:ok, Map.merge(acc, found)}}
          e -> {:halt, e}
        end
      end)
    end
  end

  # One `mg` per key, then `mn`: the batch's replies end with `MN`, so a server that answers a key with more than one
  # value (or anything past the replies asked for) is malformed at once, not read as the next key's value or left
  # unread on the socket (spec/STORES.md §2, "Shape").
  defp multi_get(conn, m, ks) do
    with {:ok, conn} <- Conn.send_all(conn, [Enum.map(ks, &["mg ", &1, " v\r\n"]), "mn\r\n"]),
         {:ok, found, conn} <-
           Enum.reduce_while(ks, {:ok, %{}, conn}, fn k, {:ok, acc, conn} ->
             case read_value(conn, m) do
               {:ok, nil, conn} -> {:cont, {:ok, acc, conn}}
               {:ok, v, conn} -> {:cont, {:ok, Map.put(acc, k, v), conn}}
               e -> {:halt, e}
             end
           end),
         {:ok, line, conn} <- Conn.line(Conn.bound(conn, @allowance)) do
      if line == "MN", do: {:ok, found, conn}, else: unexpected(line)
    end
  end

  # `VA <size> …` then the data, or `EN`: `{:ok, bytes | nil, conn}`.
  defp read_value(conn, m) do
    with {:ok, line, conn} <- Conn.line(Conn.bound(conn, m.max_item + @allowance)) do
      case String.split(line, " ") do
        ["EN"] ->
          {:ok, nil, conn}

        ["VA", size | flags] ->
          with {n, ""} when n >= 0 <- Integer.parse(size),
               true <-
                 n <= m.max_item ||
                   {:error, :malformed,
                    "a value of #{n} bytes announced; max_item is #{m.max_item}"},
               {:ok, data, conn} <- Conn.exactly(conn, n + 2),
               <<value::binary-size(n), "\r\n">> <- data do
            {:ok, value, conn, flags} |> then(fn {:ok, v, c, _} -> {:ok, v, c} end)
          else
            {:error, _, _} = e -> e
            _ -> {:error, :malformed, "a malformed value reply"}
          end

        _ ->
          unexpected(line)
      end
    end
  end

  defp unexpected(line),
    do:
      {:error, :malformed,
       "unexpected reply #{inspect(binary_part(line, 0, min(byte_size(line), 60)))}"}

  # ---------------------------------------------------------------------------------------- writes

  @impl Larder.Store
  def set(m, key, value, ttl), do: store(m, key, value, ttl, "")

  @impl Larder.Store
  def add(m, key, value, ttl) do
    case store(m, key, value, ttl, " ME") do
      :ok -> {:ok, true}
      :not_stored -> {:ok, false}
      :expired -> {:ok, false}
      e -> e
    end
  end

  defp store(m, key, value, ttl, mode) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(m.prefix, key)
      limit = m.max_item - @item_overhead - byte_size(skey)

      if byte_size(value) > limit do
        {:error,
         StoreError.new(
           @backend,
           :too_large,
           "#{inspect(key)}: #{byte_size(value)} bytes; the limit is #{limit}"
         )}
      else
        now = Store.now_ms()

        case exptime(Store.expiry(value, ttl, now), now) do
          :past ->
            # Already past its expiry: nothing is stored, and a set removes the older value.
            result = single(m, skey, fn c -> simple(c, ["md ", skey, "\r\n"], ~w(HD NF)) end)
            if match?({:ok, _}, result), do: if(mode == "", do: :ok, else: :expired), else: result

          exptime ->
            cmd = [
              "ms ",
              skey,
              " ",
              Integer.to_string(byte_size(value)),
              " T",
              Integer.to_string(exptime),
              " F0",
              mode,
              "\r\n",
              value,
              "\r\n"
            ]

            case single(m, skey, fn c -> simple(c, cmd, ~w(HD NS)) end) do
              {:ok, "HD"} ->
                :ok

              {:ok, "NS"} when mode != "" ->
                :not_stored

              {:ok, "NS"} ->
                {:error,
                 StoreError.new(@backend, :server, "the server did not store #{inspect(key)}")}

              e ->
                e
            end
        end
      end
    end
  end

  # memcached's exptime: relative seconds up to 30 days, else a Unix time; rounded up (§2).
  defp exptime(nil, _now), do: 0

  defp exptime(expiry, now) do
    secs = div(expiry - now + 999, 1000)

    cond do
      expiry <= now -> :past
      secs > @thirty_days -> div(expiry + 999, 1000)
      true -> secs
    end
  end

  # Sends `cmd`, reads one status line that must be one of `allowed`.
  defp simple(conn, cmd, allowed) do
    with {:ok, conn} <- Conn.send_all(conn, cmd),
         {:ok, line, conn} <- Conn.line(Conn.bound(conn, @allowance)) do
      cond do
        line in allowed -> {:ok, line, conn}
        String.starts_with?(line, ["SERVER_ERROR", "CLIENT_ERROR"]) -> {:answer, line, conn}
        true -> unexpected(line)
      end
    end
  end

  @impl Larder.Store
  def delete(m, key) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(m.prefix, key)

      with {:ok, r} <- single(m, skey, fn c -> simple(c, ["md ", skey, "\r\n"], ~w(HD NF)) end),
           do: {:ok, r == "HD"}
    end
  end

  @impl Larder.Store
  def delete_if(m, key, expected) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(m.prefix, key)

      single(m, skey, fn conn ->
        with {:ok, conn} <- Conn.send_all(conn, ["mg ", skey, " v c\r\n"]),
             {:ok, found, conn} <- read_cas_value(conn, m) do
          case found do
            {^expected, cas} ->
              with {:ok, r, conn} <- simple(conn, ["md ", skey, " C", cas, "\r\n"], ~w(HD NF EX)),
                   do: {:ok, r == "HD", conn}

            _ ->
              {:ok, false, conn}
          end
        end
      end)
    end
  end

  # `VA <size> c<cas>` and the data, or `EN`: `{:ok, {bytes, cas} | nil, conn}`.
  defp read_cas_value(conn, m) do
    with {:ok, line, conn} <- Conn.line(Conn.bound(conn, m.max_item + @allowance)) do
      case String.split(line, " ") do
        ["EN"] ->
          {:ok, nil, conn}

        ["VA", size | flags] ->
          cas =
            Enum.find_value(flags, fn
              "c" <> c -> if c =~ ~r/\A\d+\z/, do: c
              _ -> nil
            end)

          with {n, ""} when n >= 0 <- Integer.parse(size),
               true <- n <= m.max_item || {:error, :malformed, "a value of #{n} bytes announced"},
               true <- cas != nil || {:error, :malformed, "no CAS in the reply"},
               {:ok, <<value::binary-size(n), "\r\n">>, conn} <- Conn.exactly(conn, n + 2) do
            {:ok, {value, cas}, conn}
          else
            {:error, _, _} = e -> e
            _ -> {:error, :malformed, "a malformed value reply"}
          end

        _ ->
          unexpected(line)
      end
    end
  end

  @impl Larder.Store
  def incr(m, key, delta, ttl, create) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(m.prefix, key)
      mode = if delta < 0, do: "D", else: "I"

      vivify =
        if create do
          exp = if ttl, do: max(div(ttl + 999, 1000), 1), else: 0
          [" N", Integer.to_string(exp), " J", Integer.to_string(max(delta, 0))]
        else
          []
        end

      cmd = ["ma ", skey, " D", Integer.to_string(abs(delta)), " M", mode, " v", vivify, "\r\n"]

      result =
        single(m, skey, fn conn ->
          with {:ok, conn} <- Conn.send_all(conn, cmd),
               {:ok, line, conn} <- Conn.line(Conn.bound(conn, @allowance)) do
            case String.split(line, " ") do
              ["NF"] -> {:ok, :missing, conn}
              ["VA", size | _] -> read_number(conn, size)
              ["CLIENT_ERROR" | _] -> {:answer, line, conn}
              _ -> unexpected(line)
            end
          end
        end)

      case result do
        {:ok, :missing} ->
          :missing

        {:ok, n} ->
          {:ok, n}

        {:error, %StoreError{kind: :server, message: "CLIENT_ERROR" <> _}} ->
          {:error,
           StoreError.new(@backend, :not_a_counter, "#{inspect(key)} does not hold a counter")}

        e ->
          e
      end
    end
  end

  defp read_number(conn, size) do
    with {n, ""} when n in 0..40 <- Integer.parse(size),
         {:ok, <<digits::binary-size(n), "\r\n">>, conn} <- Conn.exactly(conn, n + 2),
         {v, ""} <- Integer.parse(digits) do
      {:ok, v, conn}
    else
      {:error, _, _} = e -> e
      _ -> {:error, :malformed, "a malformed counter reply"}
    end
  end

  # ---------------------------------------------------------------------------------------- purges

  @impl Larder.Store
  def purge_tag(m, tag) when is_binary(tag) do
    record = Integer.to_string(Store.now_ms())
    skey = Keys.internal_key(m.prefix, "tag", tag)
    cmd = ["ms ", skey, " ", Integer.to_string(byte_size(record)), " T0 F0\r\n", record, "\r\n"]

    with {:ok, "HD"} <- single(m, skey, fn c -> simple(c, cmd, ~w(HD)) end), do: {:ok, :recorded}
  end

  @impl Larder.Store
  def purge_prefix(m, prefix) do
    cond do
      not m.prefix_purge ->
        {:error,
         StoreError.new(@backend, :unsupported, "purge by prefix is off (prefix_purge=false)")}

      (e = StoreError.check_prefix(@backend, prefix)) != :ok ->
        e

      true ->
        record_prefix(m, prefix, 100)
    end
  end

  # Read–modify–write of the prefix list with CAS (or ME when absent), retried until it holds.
  defp record_prefix(_m, _prefix, 0),
    do: {:error, StoreError.new(@backend, :server, "the prefix list kept changing")}

  defp record_prefix(m, prefix, tries) do
    skey = prefixes_key(m)
    now = Store.now_ms()

    result =
      single(m, skey, fn conn ->
        with {:ok, conn} <- Conn.send_all(conn, ["mg ", skey, " v c\r\n"]),
             {:ok, found, conn} <- read_cas_value(conn, m) do
          {old, mode} =
            case found do
              nil -> {"", " ME"}
              {text, cas} -> {text, " C" <> cas}
            end

          lines =
            (prefix_lines(old) |> Enum.filter(fn {t, _} -> t >= now - m.purge_retention end)) ++
              [{now, prefix}]

          text =
            lines
            |> Enum.take(-@max_prefix_lines)
            |> Enum.map_join(fn {t, p} -> "#{t} #{p}\n" end)

          cmd = [
            "ms ",
            skey,
            " ",
            Integer.to_string(byte_size(text)),
            " T0 F0",
            mode,
            "\r\n",
            text,
            "\r\n"
          ]

          simple(conn, cmd, ~w(HD NS EX NF))
        end
      end)

    case result do
      {:ok, "HD"} -> {:ok, :recorded}
      {:ok, _} -> record_prefix(m, prefix, tries - 1)
      e -> e
    end
  end

  @impl Larder.Store
  def clear(%__MODULE__{prefix: p} = m) when p != "" do
    with {:ok, _} <- purge_prefix(m, ""), do: :ok
  end

  def clear(m) do
    Enum.reduce_while(0..(tuple_size(m.servers) - 1), :ok, fn i, :ok ->
      case on_server(m, i, fn c -> simple(c, "flush_all\r\n", ~w(OK)) end, false, nil) do
        {:ok, _} -> {:cont, :ok}
        e -> {:halt, e}
      end
    end)
  end

  # ---------------------------------------------------------------------------------------- servers

  # The server of each stored key on the ring of the servers not ejected: `{:ok, %{index => [keys]}}`. A server
  # whose ejection is over is on the ring, but a request only goes to it when it takes the server's one probe
  # (spec/STORES.md §1, probation); when another request's probe is out, its keys go where they would while it is
  # ejected. A probe taken for a server that the final ring no longer gives any key is given back.
  defp route(m, skeys, now) do
    states = for i <- 0..(tuple_size(m.servers) - 1), do: {i, Health.state(m.id, i, now)}
    live = for {i, s} <- states, s != :ejected, do: i
    due = for {i, {:due, until}} <- states, into: %{}, do: {i, until}
    place(m, skeys, live, due, %{}, now)
  end

  defp place(m, _skeys, [], _due, claimed, _now) do
    release(m, claimed, %{})
    Enum.each(0..(tuple_size(m.servers) - 1), &Health.refused(m.id, &1))
    names = m.servers |> Tuple.to_list() |> Enum.map_join(",", fn {h, p, _} -> "#{h}:#{p}" end)
    {:error, StoreError.new(@backend, :unavailable, "every server is ejected", names)}
  end

  defp place(m, skeys, live, due, claimed, now) do
    ring =
      Health.cached(m.id, {:ring, live}, fn ->
        Ring.new(Enum.map(live, &elem(m.servers, &1)), live)
      end)

    groups = Enum.group_by(skeys, &Ring.server(ring, &1))

    {won, lost} =
      for i <- Map.keys(groups),
          Map.has_key?(due, i),
          not Map.has_key?(claimed, i),
          reduce: {claimed, []} do
        {won, lost} ->
          # The probe's window outlasts the probe itself (at most `timeout`), even when retry_after is shorter.
          probe_until = now + m.retry_after + m.timeout

          if Health.claim(m.id, i, due[i], probe_until),
            do: {Map.put(won, i, {due[i], probe_until}), lost},
            else: {won, [i | lost]}
      end

    if lost == [] do
      release(m, won, groups)
      {:ok, groups}
    else
      place(m, skeys, live -- lost, due, won, now)
    end
  end

  defp release(m, claimed, groups) do
    for {i, {until, probe_until}} <- claimed,
        not Map.has_key?(groups, i),
        do: Health.release(m.id, i, until, probe_until)
  end

  defp single(m, skey, fun) do
    with {:ok, groups} <- route(m, [skey], Store.now_ms()) do
      [{i, _}] = Map.to_list(groups)
      on_server(m, i, fun, true, fn -> single(m, skey, fun) end)
    end
  end

  # One exchange with server `i`. A failure counts against it; when it ejects the server, `retry` (given on the
  # first attempt) runs once on the key's new server.
  defp on_server(m, i, fun, retry?, retry) do
    {host, port, _} = elem(m.servers, i)
    name = "#{host}:#{port}"
    deadline = System.monotonic_time(:millisecond) + m.timeout
    pool = Pool.for(m.id, i, m.pool)

    outcome =
      case Conn.open(pool, host, port, deadline, m.connect_timeout) do
        {:ok, conn} ->
          case fun.(conn) do
            {:ok, value, conn} -> finish(pool, conn, {:ok, value})
            {:answer, line, conn} -> finish(pool, conn, {:answer, line})
            {:error, kind, message} -> Pool.discard(pool, conn.socket) && {:failed, kind, message}
          end

        {:error, kind, message} ->
          {:failed, kind, message}
      end

    case outcome do
      {:ok, value} ->
        Health.success(m.id, i)
        {:ok, value}

      {:answer, line} ->
        Health.success(m.id, i)
        {:error, StoreError.new(@backend, :server, line, name)}

      {:failed, kind, message} ->
        case Health.failure(m.id, i, m.failures, m.retry_after, Store.now_ms()) do
          :ejected when retry? and retry != nil and tuple_size(m.servers) > 1 -> retry.()
          _ -> {:error, StoreError.new(@backend, kind, message, name)}
        end
    end
  end

  defp finish(pool, conn, result) do
    if Conn.clean?(conn),
      do: Pool.checkin(pool, conn.socket),
      else: Pool.discard(pool, conn.socket)

    result
  end
end
