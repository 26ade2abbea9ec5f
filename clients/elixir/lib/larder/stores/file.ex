defmodule Larder.Stores.File do
  @moduledoc """
  `file:///var/cache/larder?prefix=…` (spec/STORES.md §7): one file per key under `<root>/<h[0..2]>/<h[2..4]>/<h>`
  (h = SHA-256 of the stored key), each `LDR1`, expires_at, the key, then the value. Writes go to a temporary file
  in the same directory and are renamed over the name, so readers see a whole file, old or new, with any number of
  processes and languages on one directory.

  `add`, `incr` and `delete_if` hold the exclusive `flock` of the shard's `.lock`, as the other languages do. Erlang
  has no `flock`, so the lock is held by `flock(1)` (util-linux) run as a port for the length of the operation:
  closing the port ends it and releases the lock, whatever happens to the caller.

  Only files of the store are read, purged or deleted: regular files (not links; neither a shard directory nor the
  file may be a link) that start with the magic, whose key fits and hashes to the name.

  `capacity=10G` (default unbounded) bounds the bytes of those files: past it, a writer deletes the oldest-modified
  files down to 90% of it (`Larder.Stores.File.Capacity`). A value larger than half the capacity is refused
  (`:too_large`), as the Rust store does.
  """

  @behaviour Larder.Store

  alias Larder.{Keys, Store, StoreError}
  alias Larder.Stores.File.{Capacity, Scan}

  defstruct [:root, :prefix, :capacity]

  @backend "file"
  @magic "LDR1"

  @doc "A store handle for a parsed `file://` URL. Raises ArgumentError for a bad or unknown option."
  def open(%Store.URL{} = url) do
    if url.hosts != [],
      do: raise(ArgumentError, "#{Store.URL.redact(url)}: file:// takes no host")

    if url.path == "",
      do: raise(ArgumentError, "#{Store.URL.redact(url)}: file:// needs a directory")

    {prefix, url} = Store.URL.take(url, "prefix", "")

    # 0, as in the other languages, is unbounded.
    {capacity, url} = Store.URL.take_size(url, "capacity", 0)
    Store.URL.finish(url)
    File.mkdir_p!(url.path)
    capacity = if capacity > 0, do: Capacity.new(url.path, capacity)

    %Store{
      module: __MODULE__,
      backend: @backend,
      ref: %__MODULE__{root: url.path, prefix: prefix, capacity: capacity}
    }
  end

  @impl Larder.Store
  def get(f, key) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)

      case read(f, skey) do
        {:ok, _exp, value} -> {:ok, value}
        :none -> :miss
      end
    end
  end

  @impl Larder.Store
  def get_many(f, keys) do
    with :ok <- StoreError.check_keys(@backend, keys) do
      {:ok, for(k <- keys, {:ok, v} <- [get(f, k)], into: %{}, do: {k, v})}
    end
  end

  @impl Larder.Store
  def set(f, key, value, ttl) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)
      now = Store.now_ms()

      case Store.expiry(value, ttl, now) do
        exp when exp != nil and exp <= now ->
          # Already past its expiry: nothing is stored, and the older value is removed.
          if read(f, skey) != :none, do: remove(f, path(f, skey))
          :ok

        exp ->
          write(f, skey, value, exp)
      end
    end
  end

  @impl Larder.Store
  def add(f, key, value, ttl) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)
      now = Store.now_ms()

      case Store.expiry(value, ttl, now) do
        exp when exp != nil and exp <= now ->
          {:ok, false}

        exp ->
          locked(f, skey, fn ->
            if read(f, skey) == :none do
              with :ok <- write(f, skey, value, exp), do: {:ok, true}
            else
              {:ok, false}
            end
          end)
      end
    end
  end

  @impl Larder.Store
  def delete(f, key) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)
      {:ok, read(f, skey) != :none and remove(f, path(f, skey)) == :ok}
    end
  end

  @impl Larder.Store
  def delete_if(f, key, expected) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)

      locked(f, skey, fn ->
        case read(f, skey) do
          {:ok, _, ^expected} -> {:ok, remove(f, path(f, skey)) == :ok}
          _ -> {:ok, false}
        end
      end)
    end
  end

  @impl Larder.Store
  def incr(f, key, delta, ttl, create) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)

      locked(f, skey, fn ->
        case read(f, skey) do
          :none when create ->
            n = Store.saturate(delta)
            exp = if ttl, do: Store.now_ms() + ttl, else: nil
            with :ok <- write(f, skey, Integer.to_string(n), exp), do: {:ok, n}

          :none ->
            :missing

          {:ok, exp, raw} ->
            case Store.parse_counter(raw) do
              nil ->
                {:error,
                 StoreError.new(
                   @backend,
                   :not_a_counter,
                   "#{inspect(key)} does not hold a counter"
                 )}

              old ->
                n = Store.saturate(old + delta)
                with :ok <- write(f, skey, Integer.to_string(n), exp), do: {:ok, n}
            end
        end
      end)
    end
  end

  @impl Larder.Store
  def purge_tag(f, tag) when is_binary(tag) do
    {:ok,
     count_removed(f, fn key, value ->
       String.starts_with?(key, f.prefix) and tag in Store.entry_tags(value)
     end)}
  end

  @impl Larder.Store
  def purge_prefix(f, prefix) do
    with :ok <- StoreError.check_prefix(@backend, prefix) do
      stored = f.prefix <> prefix
      {:ok, count_removed(f, fn key, _ -> String.starts_with?(key, stored) end)}
    end
  end

  @impl Larder.Store
  def clear(%__MODULE__{prefix: ""} = f) do
    count_removed(f, fn _, _ -> true end)
    :ok
  end

  def clear(f), do: with({:ok, _} <- purge_prefix(f, ""), do: :ok)

  # -------------------------------------------------------------------------------------- files

  defp hash(skey), do: Base.encode16(:crypto.hash(:sha256, skey), case: :lower)

  defp path(f, skey) do
    h = hash(skey)
    Path.join([f.root, binary_part(h, 0, 2), binary_part(h, 2, 2), h])
  end

  # A regular file, reached without a link at the shard directories or the file itself.
  defp regular?(path) do
    dir = Path.dirname(path)

    match?({:ok, %{type: :regular}}, File.lstat(path)) and
      match?({:ok, %{type: :directory}}, File.lstat(dir)) and
      match?({:ok, %{type: :directory}}, File.lstat(Path.dirname(dir)))
  end

  defp read(f, skey) do
    p = path(f, skey)

    with true <- regular?(p),
         {:ok, data} <- File.read(p),
         {:ok, exp, ^skey, value} <- parse(data) do
      if exp != 0 and exp <= Store.now_ms() do
        remove(f, p)
        :none
      else
        {:ok, if(exp == 0, do: nil, else: exp), value}
      end
    else
      _ -> :none
    end
  end

  defp parse(<<@magic, exp::little-64, len::little-16, key::binary-size(len), value::binary>>),
    do: {:ok, exp, key, value}

  defp parse(_), do: :bad

  defp write(%{capacity: %Capacity{bytes: bytes}}, skey, value, _exp)
       when byte_size(value) > div(bytes, 2) do
    {:error,
     StoreError.new(
       @backend,
       :too_large,
       "#{inspect(skey)}: #{byte_size(value)} bytes; the limit is half the capacity, #{div(bytes, 2)}"
     )}
  end

  defp write(f, skey, value, exp) do
    p = path(f, skey)
    dir = Path.dirname(p)
    size = 14 + byte_size(skey) + byte_size(value)

    tmp =
      Path.join(
        dir,
        ".#{Path.basename(p)}.#{Base.encode16(:crypto.strong_rand_bytes(6), case: :lower)}.tmp"
      )

    with :ok <- File.mkdir_p(dir),
         true <- match?({:ok, %{type: :directory}}, File.lstat(dir)) || {:error, :link},
         :ok <-
           File.write(
             tmp,
             [@magic, <<exp || 0::little-64, byte_size(skey)::little-16>>, skey, value],
             [:exclusive]
           ),
         old = old_size(p),
         :ok <- File.rename(tmp, p) do
      Capacity.add(f.capacity, size - old)
      Capacity.enforce(f.capacity, f.root)
    else
      e ->
        File.rm(tmp)
        {:error, StoreError.new(@backend, :unavailable, "cannot write #{p}: #{inspect(e)}")}
    end
  end

  # The size of the store's file at `p` about to be replaced or deleted (0 for none, or for a link).
  defp old_size(p) do
    case File.lstat(p) do
      {:ok, %{type: :regular, size: size}} -> size
      _ -> 0
    end
  end

  # Deletes the file at `p`, taking its bytes off the capacity's estimate.
  defp remove(f, p) do
    old = old_size(p)

    with :ok <- File.rm(p) do
      Capacity.add(f.capacity, -old)
      :ok
    end
  end

  # Runs `fun` holding the exclusive flock of the key's shard `.lock`, through flock(1) as a port.
  defp locked(f, skey, fun) do
    p = path(f, skey)
    dir = Path.dirname(p)
    :ok = File.mkdir_p(dir)
    lock = Path.join(dir, ".lock")

    case {System.find_executable("flock"), File.lstat(lock)} do
      {nil, _} ->
        {:error,
         StoreError.new(
           @backend,
           :unsupported,
           "flock(1) (util-linux) is needed for add, incr and delete_if"
         )}

      {_, {:ok, %{type: t}}} when t != :regular ->
        {:error, StoreError.new(@backend, :unavailable, "#{lock} is not a regular file: refused")}

      {flock, _} ->
        port =
          Port.open({:spawn_executable, flock}, [
            :binary,
            :exit_status,
            args: ["-x", lock, "-c", "echo locked; exec cat"]
          ])

        try do
          receive do
            {^port, {:data, "locked" <> _}} ->
              fun.()

            {^port, {:exit_status, s}} ->
              {:error, StoreError.new(@backend, :unavailable, "flock exited #{s}")}
          after
            10_000 ->
              {:error,
               StoreError.new(@backend, :timeout, "the lock of #{dir} was not granted in 10 s")}
          end
        after
          Port.close(port)
        end
    end
  end

  # Deletes the store's files for which `match?.(key, value)`: the count removed.
  defp count_removed(f, match?) do
    n =
      for p <- Scan.candidates(f.root),
          {:ok, data} <- [File.read(p)],
          {:ok, _exp, key, value} <- [parse(data)],
          hash(key) == Path.basename(p),
          match?.(key, value),
          remove(f, p) == :ok,
          reduce: 0 do
        n -> n + 1
      end

    Capacity.rescan(f.capacity, f.root)
    n
  end
end
