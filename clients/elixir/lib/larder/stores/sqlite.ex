defmodule Larder.Stores.SQLite do
  @moduledoc """
  `sqlite:///path/cache.db?prefix=…&table=larder_entries` (spec/STORES.md §6): the table of Rails' Solid Cache and
  its tag index, the same statements as the Rust, Python, Ruby, Go and TypeScript clients, so they share one file.
  Rows are found by `key_hash` (the first 8 bytes of SHA-256 of the stored key, big-endian signed) and must hold
  the stored key itself (another key under the same hash is a miss, and a write replaces it); expired rows are
  misses, and one write in 100 sweeps up to 1,000 of them. `set` and `add` write the row and its tags in one
  transaction; counters are read, then updated only where the value is still the one read (up to 100 tries).
  Purges are exact. Values are bounded both ways (`max_value`, 512 MiB as in the other languages): a larger value
  is refused on write and a larger row (another writer's) is a `:too_large` error on read, never loaded.

  Every call goes through this node's one connection to the file (`Larder.Stores.SQLite.Connection`) and waits at
  most `timeout` (10 s: SQLite's busy timeout is 5 s per statement); failures are `{:error, %Larder.StoreError{}}`.
  """

  @behaviour Larder.Store

  alias Larder.{Keys, Store, StoreError}
  alias Larder.Stores.SQLite.Connection

  import Connection, only: [query: 2, query: 3, transaction: 2]

  defstruct [:id, :path, :prefix, :entries, :tags, :schema, :timeout, :max_value, :writes]

  @backend "sqlite"
  @schema_version 1
  @sweep_every 100
  @sweep_rows 1000
  @chunk 500
  @table ~r/\A[a-z_][a-z0-9_]{0,50}\z/

  @doc """
  A store for a parsed `sqlite://` URL, its tables created when missing: `{:ok, store}` or `{:error,
  %StoreError{}}` (a database of a newer larder schema, a file that is not a database, a directory that does not
  exist). Raises ArgumentError for a bad URL. `opts`: `max_value` (bytes), `timeout` (ms).
  """
  def open(%Store.URL{} = url, opts \\ []) do
    {prefix, url} = Store.URL.take_prefix(url)
    {table, url} = Store.URL.take(url, "table", "larder_entries")
    Store.URL.finish(url)

    cond do
      not Code.ensure_loaded?(:sqlite3) ->
        {:error,
         StoreError.new(
           @backend,
           :unsupported,
           "#{Store.URL.redact(url)}: the SQLite driver (Debian's erlang-p1-sqlite3) is not installed"
         )}

      url.hosts != [] or url.user != nil ->
        raise ArgumentError,
              "#{Store.URL.redact(url)}: sqlite:// takes a path, not a host (write sqlite:///path)"

      byte_size(url.path) < 2 ->
        raise ArgumentError,
              "#{Store.URL.redact(url)}: sqlite:// needs a file: sqlite:///var/lib/larder/cache.db"

      not String.valid?(url.path) or String.contains?(url.path, <<0>>) ->
        raise ArgumentError, "#{Store.URL.redact(url)}: the path is not UTF-8 text"

      not Regex.match?(@table, table) ->
        raise ArgumentError,
              "#{Store.URL.redact(url)}: table=#{inspect(table)}: lowercase letters, digits and _ only"

      prefix != "" and Keys.prefix_problem(prefix) != nil ->
        raise ArgumentError,
              "#{Store.URL.redact(url)}: option prefix: #{Keys.prefix_problem(prefix)}"

      # Checked here rather than left to the driver, which also prints its failure to stderr.
      not File.dir?(Path.dirname(url.path)) ->
        {:error,
         StoreError.new(
           @backend,
           :unavailable,
           "cannot open #{url.path}: #{Path.dirname(url.path)} is not a directory",
           url.path
         )}

      true ->
        r = %__MODULE__{
          id: {__MODULE__, url.path},
          path: url.path,
          prefix: prefix,
          entries: table,
          tags: table <> "_tags",
          schema: table <> "_schema",
          timeout: Keyword.get(opts, :timeout, 10_000),
          max_value: Keyword.get(opts, :max_value, 512 * 1024 * 1024),
          writes: :atomics.new(1, [])
        }

        with {:ok, :ready} <- run(r, &ensure_schema(r, &1)),
             do: {:ok, %Store{module: __MODULE__, ref: r, backend: @backend}}
    end
  end

  @doc "The key hash of spec/STORES.md §6: the first 8 bytes of SHA-256(stored key), big-endian signed."
  def key_hash(stored_key) do
    <<h::signed-big-64, _::binary>> = :crypto.hash(:sha256, stored_key)
    h
  end

  defp ensure_schema(r, db) do
    transaction(db, fn ->
      for statement <- create_statements(r), do: query(db, statement)

      case query(db, "SELECT CAST(MAX(version) AS BIGINT) FROM #{r.schema}") do
        [[:null]] ->
          query(db, "INSERT INTO #{r.schema} (version) VALUES (?)", [@schema_version])
          :ready

        [[v]] when is_integer(v) and v <= @schema_version ->
          :ready

        [[v]] ->
          throw(
            {:sql, :server,
             "the database's larder schema is version #{inspect(v)}, newer than this larder's #{@schema_version}"}
          )
      end
    end)
  end

  defp create_statements(%{entries: e, tags: t, schema: s}) do
    [
      "CREATE TABLE IF NOT EXISTS #{e} (key_hash BIGINT PRIMARY KEY, key TEXT NOT NULL, value BLOB NOT NULL," <>
        " byte_size INTEGER NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT)",
      "CREATE INDEX IF NOT EXISTS #{e}_key ON #{e} (key)",
      "CREATE INDEX IF NOT EXISTS #{e}_expires_at ON #{e} (expires_at)",
      "CREATE TABLE IF NOT EXISTS #{t} (tag TEXT NOT NULL, key_hash BIGINT NOT NULL, PRIMARY KEY (tag, key_hash))",
      "CREATE INDEX IF NOT EXISTS #{t}_key_hash ON #{t} (key_hash)",
      "CREATE TABLE IF NOT EXISTS #{s} (version INTEGER NOT NULL)"
    ]
  end

  @impl Larder.Store
  def get(r, key) do
    with :ok <- StoreError.check_key(@backend, key),
         {:ok, found} <- get_stored(r, [skey(r, key)]) do
      case Map.values(found) do
        [value] -> {:ok, value}
        [] -> :miss
      end
    end
  end

  @impl Larder.Store
  def get_many(_r, []), do: {:ok, %{}}

  def get_many(r, keys) do
    keys = Enum.uniq(keys)

    with :ok <- StoreError.check_keys(@backend, keys),
         {:ok, found} <- get_stored(r, Enum.map(keys, &skey(r, &1))) do
      {:ok, for(k <- keys, v = Map.get(found, skey(r, k)), v != nil, into: %{}, do: {k, v})}
    end
  end

  # The live values of stored keys: %{stored key => bytes}. A row whose value is over max_value is an error, a
  # row of another key (a hash collision) or past its expiry is left out.
  defp get_stored(r, stored) do
    stored
    |> Enum.chunk_every(@chunk)
    |> Enum.reduce_while({:ok, %{}}, fn chunk, {:ok, acc} ->
      marks = Enum.map_join(chunk, ",", fn _ -> "?" end)

      sql =
        "SELECT key, CASE WHEN length(CAST(value AS BLOB)) <= ? THEN value END," <>
          " length(CAST(value AS BLOB)), expires_at FROM #{r.entries} WHERE key_hash IN (#{marks})"

      params = [r.max_value | Enum.map(chunk, &key_hash/1)]

      case run(r, fn db -> query(db, sql, params) end) do
        {:ok, rows} ->
          case live_values(r, rows, MapSet.new(chunk), Store.now_ms(), acc) do
            {:ok, acc} -> {:cont, {:ok, acc}}
            e -> {:halt, e}
          end

        e ->
          {:halt, e}
      end
    end)
  end

  defp live_values(_r, [], _wanted, _now, acc), do: {:ok, acc}

  defp live_values(r, [[key, value, size, expires] | rows], wanted, now, acc) do
    cond do
      not (is_binary(key) and MapSet.member?(wanted, key)) ->
        live_values(r, rows, wanted, now, acc)

      is_integer(expires) and expires <= now ->
        live_values(r, rows, wanted, now, acc)

      expires != :null and not is_integer(expires) ->
        error(r, :malformed, "#{inspect(key)}: expires_at is not an integer")

      value == :null and is_integer(size) ->
        error(r, :too_large, "#{inspect(key)}: #{size} bytes; max_value is #{r.max_value}")

      true ->
        case bytes(value) do
          nil -> error(r, :malformed, "#{inspect(key)}: the value is neither a BLOB nor text")
          b -> live_values(r, rows, wanted, now, Map.put(acc, key, b))
        end
    end
  end

  defp live_values(r, [_ | _], _, _, _), do: error(r, :malformed, "a row of the wrong shape")

  defp bytes({:blob, b}) when is_binary(b), do: b
  defp bytes(b) when is_binary(b), do: b
  defp bytes(_), do: nil

  @impl Larder.Store
  def set(r, key, value, ttl) do
    with {:ok, _} <- write(r, key, value, ttl, false), do: :ok
  end

  @impl Larder.Store
  def add(r, key, value, ttl), do: write(r, key, value, ttl, true)

  # `{:ok, written?}`: in one transaction, the row (replacing one of another key under the same hash) and its
  # tags; `only_if_absent` writes only over no row or an expired one. A value already past its expiry is not
  # stored (and `set` deletes the old one).
  defp write(r, key, value, ttl, only_if_absent) do
    with :ok <- StoreError.check_key(@backend, key),
         :ok <- check_size(r, key, value) do
      stored = skey(r, key)
      h = key_hash(stored)
      now = Store.now_ms()
      expiry = Store.expiry(value, ttl, now)
      e = r.entries

      upsert =
        "INSERT INTO #{e} (key_hash, key, value, byte_size, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)" <>
          " ON CONFLICT (key_hash) DO UPDATE SET key = excluded.key, value = excluded.value," <>
          " byte_size = excluded.byte_size, created_at = excluded.created_at, expires_at = excluded.expires_at" <>
          if(only_if_absent,
            do: " WHERE #{e}.expires_at IS NOT NULL AND #{e}.expires_at <= ?",
            else: ""
          ) <> " RETURNING 1"

      params =
        [h, stored, {:blob, value}, byte_size(stored) + byte_size(value), now, expiry || :null] ++
          if(only_if_absent, do: [now], else: [])

      result =
        cond do
          expiry != nil and expiry <= now and only_if_absent ->
            {:ok, false}

          expiry != nil and expiry <= now ->
            run(r, fn db ->
              transaction(db, fn ->
                query(db, "DELETE FROM #{e} WHERE key_hash = ?", [h])
                query(db, "DELETE FROM #{r.tags} WHERE key_hash = ?", [h])
                false
              end)
            end)

          true ->
            run(r, fn db ->
              transaction(db, fn ->
                case query(db, upsert, params) do
                  [] ->
                    false

                  [_] ->
                    query(db, "DELETE FROM #{r.tags} WHERE key_hash = ?", [h])

                    for tag <- Enum.uniq(Store.entry_tags(value)),
                        do:
                          query(
                            db,
                            "INSERT INTO #{r.tags} (tag, key_hash) VALUES (?, ?) ON CONFLICT DO NOTHING",
                            [tag, h]
                          )

                    true
                end
              end)
            end)
        end

      sweep(r)
      result
    end
  end

  defp check_size(r, key, value) do
    if byte_size(value) > r.max_value,
      do:
        error(
          r,
          :too_large,
          "#{inspect(key)}: #{byte_size(value)} bytes; max_value is #{r.max_value}"
        ),
      else: :ok
  end

  # About one write in 100 also deletes up to 1,000 expired rows (their tag rows go with the next purge).
  defp sweep(r) do
    if rem(:atomics.add_get(r.writes, 1, 1), @sweep_every) == 0 do
      e = r.entries

      run(r, fn db ->
        query(
          db,
          "DELETE FROM #{e} WHERE key_hash IN (SELECT key_hash FROM #{e} WHERE expires_at IS NOT NULL" <>
            " AND expires_at <= ? LIMIT ?)",
          [Store.now_ms(), @sweep_rows]
        )
      end)
    end

    :ok
  end

  @impl Larder.Store
  def delete(r, key) do
    with :ok <- StoreError.check_key(@backend, key) do
      stored = skey(r, key)
      h = key_hash(stored)

      run(r, fn db ->
        transaction(db, fn ->
          case query(
                 db,
                 "DELETE FROM #{r.entries} WHERE key_hash = ? AND key = ? RETURNING expires_at",
                 [
                   h,
                   stored
                 ]
               ) do
            [] ->
              false

            [[expires]] ->
              query(db, "DELETE FROM #{r.tags} WHERE key_hash = ?", [h])
              not is_integer(expires) or expires > Store.now_ms()
          end
        end)
      end)
    end
  end

  @impl Larder.Store
  def delete_if(r, key, expected) do
    with :ok <- StoreError.check_key(@backend, key) do
      stored = skey(r, key)

      with {:ok, rows} <-
             run(r, fn db ->
               query(
                 db,
                 "DELETE FROM #{r.entries} WHERE key_hash = ? AND key = ? AND value = ? RETURNING 1",
                 [key_hash(stored), stored, {:blob, expected}]
               )
             end),
           do: {:ok, rows != []}
    end
  end

  @impl Larder.Store
  def incr(r, key, delta, ttl, create) do
    with :ok <- StoreError.check_key(@backend, key),
         do: incr_attempt(r, key, skey(r, key), delta, ttl, create, 100)
  end

  # Optimistic, with no lock held across round trips: read, then update only where the value is still the one
  # read; another writer in between means reading again.
  defp incr_attempt(r, key, _stored, _delta, _ttl, _create, 0),
    do: error(r, :server, "counter #{inspect(key)} kept changing under 100 attempts to update it")

  defp incr_attempt(r, key, stored, delta, ttl, create, tries) do
    h = key_hash(stored)
    select = "SELECT value, expires_at FROM #{r.entries} WHERE key_hash = ? AND key = ?"

    update =
      "UPDATE #{r.entries} SET value = ?, byte_size = ? WHERE key_hash = ? AND value = ? RETURNING 1"

    # The read and the conditional update are two statements (no transaction), run back to back on the
    # connection: a round trip to the caller between them would let faster writers win every race.
    attempt =
      run(r, fn db ->
        now = Store.now_ms()

        case query(db, select, [h, stored]) do
          [[value, expires]] when expires == :null or (is_integer(expires) and expires > now) ->
            case bytes(value) && Store.parse_counter(bytes(value)) do
              nil ->
                :not_a_counter

              old ->
                n = Store.saturate(old + delta)
                text = Integer.to_string(n)

                case query(db, update, [
                       {:blob, text},
                       byte_size(stored) + byte_size(text),
                       h,
                       value
                     ]) do
                  [_] -> {:updated, n}
                  [] -> :changed
                end
            end

          _ ->
            :absent
        end
      end)

    case attempt do
      {:ok, {:updated, n}} ->
        {:ok, n}

      {:ok, :changed} ->
        incr_attempt(r, key, stored, delta, ttl, create, tries - 1)

      {:ok, :not_a_counter} ->
        error(r, :not_a_counter, "#{inspect(key)} does not hold a counter")

      {:ok, :absent} when not create ->
        :missing

      {:ok, :absent} ->
        n = Store.saturate(delta)

        case write(r, key, Integer.to_string(n), ttl, true) do
          {:ok, true} -> {:ok, n}
          {:ok, false} -> incr_attempt(r, key, stored, delta, ttl, create, tries - 1)
          e -> e
        end

      e ->
        e
    end
  end

  @impl Larder.Store
  def purge_tag(r, tag) when is_binary(tag) do
    with {:ok, rows} <-
           run(r, fn db -> query(db, "SELECT key_hash FROM #{r.tags} WHERE tag = ?", [tag]) end),
         {:ok, n} <- delete_hashes(r, Enum.map(rows, &hd/1)),
         {:ok, _} <-
           run(r, fn db -> query(db, "DELETE FROM #{r.tags} WHERE tag = ?", [tag]) end) do
      {:ok, n}
    end
  end

  @impl Larder.Store
  def purge_prefix(r, prefix) do
    with :ok <- StoreError.check_prefix(@backend, prefix) do
      stored = r.prefix <> prefix

      sql = "SELECT key_hash FROM #{r.entries} WHERE substr(key, 1, #{characters(stored)}) = ?"

      with {:ok, rows} <- run(r, fn db -> query(db, sql, [stored]) end),
           do: delete_hashes(r, Enum.map(rows, &hd/1))
    end
  end

  # The length of `text` in SQLite's characters, which substr counts: every byte that does not continue a UTF-8
  # sequence starts one (code points for valid UTF-8, as spec/STORES.md §6 says; not graphemes, which
  # String.length counts: "e" and U+0301 are one grapheme and two characters, so a purge of that prefix matched
  # nothing).
  defp characters(text), do: for(<<c <- text>>, c not in 0x80..0xBF, reduce: 0, do: (n -> n + 1))

  defp delete_hashes(r, hashes) do
    hashes
    |> Enum.chunk_every(@chunk)
    |> Enum.reduce_while({:ok, 0}, fn chunk, {:ok, n} ->
      marks = Enum.map_join(chunk, ",", fn _ -> "?" end)

      case run(r, fn db ->
             transaction(db, fn ->
               deleted =
                 query(
                   db,
                   "DELETE FROM #{r.entries} WHERE key_hash IN (#{marks}) RETURNING 1",
                   chunk
                 )

               query(db, "DELETE FROM #{r.tags} WHERE key_hash IN (#{marks})", chunk)
               length(deleted)
             end)
           end) do
        {:ok, d} -> {:cont, {:ok, n + d}}
        e -> {:halt, e}
      end
    end)
  end

  @impl Larder.Store
  def clear(%__MODULE__{prefix: ""} = r) do
    with {:ok, _} <-
           run(r, fn db ->
             transaction(db, fn ->
               query(db, "DELETE FROM #{r.entries}")
               query(db, "DELETE FROM #{r.tags}")
             end)
           end),
         do: :ok
  end

  def clear(r), do: with({:ok, _} <- purge_prefix(r, ""), do: :ok)

  defp skey(r, key), do: Keys.stored_key(r.prefix, key)

  defp run(r, fun) do
    case Connection.run(r.id, r.path, fun, r.timeout) do
      {:ok, result} -> {:ok, result}
      {:error, kind, message} -> error(r, kind, message)
    end
  end

  defp error(r, kind, message), do: {:error, StoreError.new(@backend, kind, message, r.path)}
end
