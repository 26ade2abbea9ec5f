defmodule Larder.Stores.File do
  @moduledoc """
  `file:///var/cache/larder?prefix=…&mode=0600&capacity=10G` (spec/STORES.md §7): one file per key under
  `<root>/<h[0..2]>/<h[2..4]>/<h>` (h = SHA-256 of the stored key), each `LDR1`, expires_at, the key, then the value.
  Writes go to a temporary file in the same directory and are renamed over the name, so readers see a whole file,
  old or new, with any number of processes and languages on one directory.

  `mode` (three or four octal digits, default `0600`) is the mode of the files this store creates; its directories
  get it plus a search bit wherever it has a read bit (0600 → 0700, 0640 → 0750). A mode that does not give the
  owner read and write, or that has setuid, setgid or sticky bits, is a URL error. Modes are set exactly (through
  the new file's own descriptor), so a cache of private pages is not readable by other users unless the URL says so.

  Links: the root may be a link; below it, a link in any component (a shard directory, a file, the `.lock`) is never
  followed, for reads, writes, deletes, purges, `clear` and capacity eviction: a read finds a miss, a write is an
  `:unavailable` error, and the link and what it points to are left as they are. Every component is checked as it
  is opened, not before (`Larder.Stores.File.Tree`), so one swapped for a link meanwhile redirects nothing.

  `add`, `incr` and `delete_if` hold the exclusive `flock` of the shard's `.lock`, as the other languages do. Erlang
  has no `flock`, so the lock is held by `flock(1)` (util-linux) run as a port for the length of the operation:
  closing the port ends it and releases the lock, whatever happens to the caller. The shell that opens `.lock` for
  it opens it through the shard directory this store opened, without creating it, and reports what it opened, which
  must be the regular file the store checked.

  Only files of the store are read, purged or deleted: regular files that start with the magic, whose key fits and
  hashes to the name (`Larder.Stores.File.Scan`).

  `capacity=10G` (default unbounded) bounds the bytes of those files: past it, a writer deletes the oldest-modified
  files down to 90% of it (`Larder.Stores.File.Capacity`). A value larger than half the capacity is refused
  (`:too_large`), as the Rust store does.

  Needs Linux's `/proc/self/fd` (`Larder.Stores.File.Tree`): elsewhere `open/1` refuses.
  """

  @behaviour Larder.Store

  alias Larder.{Keys, Store, StoreError}
  alias Larder.Stores.File.{Capacity, Scan, Tree}

  defstruct [:root, :prefix, :capacity, mode: 0o600, dir_mode: 0o700]

  @backend "file"
  @magic "LDR1"
  @default_mode 0o600
  @lock_wait_ms 10_000

  @doc "A store handle for a parsed `file://` URL. Raises ArgumentError for a bad or unknown option."
  def open(%Store.URL{} = url) do
    if url.hosts != [],
      do: raise(ArgumentError, "#{Store.URL.redact(url)}: file:// takes no host")

    if url.path == "",
      do: raise(ArgumentError, "#{Store.URL.redact(url)}: file:// needs a directory")

    {prefix, url} = Store.URL.take_prefix(url)
    {mode, url} = Store.URL.take_mode(url, "mode", @default_mode)

    # 0, as in the other languages, is unbounded.
    {capacity, url} = Store.URL.take_size(url, "capacity", 0)
    Store.URL.finish(url)

    unless Tree.available?(),
      do:
        raise(
          ArgumentError,
          "#{Store.URL.redact(url)}: file:// needs /proc/self/fd (Linux) to open files below its root without following links"
        )

    make_root(url.path, Tree.dir_mode(mode))
    capacity = if capacity > 0, do: Capacity.new(url.path, capacity)

    %Store{
      module: __MODULE__,
      backend: @backend,
      ref: %__MODULE__{
        root: url.path,
        prefix: prefix,
        capacity: capacity,
        mode: mode,
        dir_mode: Tree.dir_mode(mode)
      }
    }
  end

  # Makes the root when it is missing, with the directory mode (a root that exists keeps its own).
  defp make_root(root, dir_mode) do
    unless File.exists?(root) do
      File.mkdir_p!(root)
      Tree.within(root, [], nil, &Tree.set_mode(&1, dir_mode))
    end
  end

  @impl Larder.Store
  def get(f, key) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)

      case in_shard(f, skey, false, &read_entry(f, &1, &2, skey)) do
        {:done, {:ok, _exp, value}} -> {:ok, value}
        _ -> :miss
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
          in_shard(f, skey, false, fn dir, h ->
            if read_entry(f, dir, h, skey) != :none, do: remove_file(f, dir, h)
          end)

          :ok

        exp ->
          skey |> in_shard_for_write(f, &write_entry(f, &1, &2, skey, value, exp)) |> enforced(f)
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
          locked(f, skey, fn dir, h ->
            if read_entry(f, dir, h, skey) == :none do
              with :ok <- write_entry(f, dir, h, skey, value, exp), do: {:ok, true}
            else
              {:ok, false}
            end
          end)
          |> enforced(f)
      end
    end
  end

  @impl Larder.Store
  def delete(f, key) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)

      removed =
        in_shard(f, skey, false, fn dir, h ->
          read_entry(f, dir, h, skey) != :none and remove_file(f, dir, h) == :ok
        end)

      {:ok, removed == {:done, true}}
    end
  end

  @impl Larder.Store
  def delete_if(f, key, expected) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)

      # A delete: a shard that is missing, a link or not a directory holds nothing to delete (spec/STORES.md §7), so
      # it is a no-op as for `delete`, and no shard is made for it.
      locked(
        f,
        skey,
        fn dir, h ->
          case read_entry(f, dir, h, skey) do
            {:ok, _, ^expected} -> {:ok, remove_file(f, dir, h) == :ok}
            _ -> {:ok, false}
          end
        end,
        {:ok, false}
      )
    end
  end

  @impl Larder.Store
  def incr(f, key, delta, ttl, create) do
    with :ok <- StoreError.check_key(@backend, key) do
      skey = Keys.stored_key(f.prefix, key)

      locked(f, skey, fn dir, h ->
        case read_entry(f, dir, h, skey) do
          :none when create ->
            n = Store.saturate(delta)
            exp = if ttl, do: Store.now_ms() + ttl, else: nil
            with :ok <- write_entry(f, dir, h, skey, Integer.to_string(n), exp), do: {:ok, n}

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
                with :ok <- write_entry(f, dir, h, skey, Integer.to_string(n), exp), do: {:ok, n}
            end
        end
      end)
      |> enforced(f)
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

  defp shard(h), do: [binary_part(h, 0, 2), binary_part(h, 2, 2)]

  # Runs `fun.(shard_dir, h)` in the key's shard directory, opened without a link (`Larder.Stores.File.Tree`):
  # `{:done, result}`, or `:missing` / `{:error, reason}` when the shard is missing (and not `create?`), a link or
  # not a directory.
  defp in_shard(f, skey, create?, fun) do
    h = hash(skey)
    Tree.within(f.root, shard(h), if(create?, do: f.dir_mode), &{:done, fun.(&1, h)})
  end

  # `in_shard/4` for a write: `fun`'s result, or the caller's error when the shard cannot be opened or made.
  defp in_shard_for_write(skey, f, fun) do
    case in_shard(f, skey, true, fun) do
      {:done, result} -> result
      {:error, reason} -> shard_error(skey, reason)
      :missing -> shard_error(skey, :enoent)
    end
  end

  defp shard_error(skey, reason) do
    where = Path.join(shard(hash(skey)))

    {:error,
     StoreError.new(@backend, :unavailable, "cannot use shard #{where}: #{describe(reason)}")}
  end

  defp describe(:link), do: "a symbolic link (never followed)"
  defp describe(:not_a_directory), do: "not a directory"
  defp describe(:not_regular), do: "not a regular file (a link or a foreign file; left alone)"
  defp describe(reason) when is_atom(reason), do: :file.format_error(reason) |> to_string()
  defp describe(reason), do: inspect(reason)

  # After a write: the capacity's eviction, outside the shard (it scans the whole root).
  defp enforced(result, f) do
    if match?({:error, _}, result), do: result, else: enforce(result, f)
  end

  defp enforce(result, f) do
    Capacity.enforce(f.capacity, f.root)
    result
  end

  defp read_entry(f, dir, h, skey) do
    with {:ok, data} <- Tree.read(dir, h),
         {:ok, exp, ^skey, value} <- parse(data) do
      if exp != 0 and exp <= Store.now_ms() do
        remove_file(f, dir, h)
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

  defp write_entry(%{capacity: %Capacity{bytes: bytes}}, _dir, _h, skey, value, _exp)
       when byte_size(value) > div(bytes, 2) do
    {:error,
     StoreError.new(
       @backend,
       :too_large,
       "#{inspect(skey)}: #{byte_size(value)} bytes; the limit is half the capacity, #{div(bytes, 2)}"
     )}
  end

  defp write_entry(f, dir, h, skey, value, exp) do
    size = 14 + byte_size(skey) + byte_size(value)
    data = [@magic, <<exp || 0::little-64, byte_size(skey)::little-16>>, skey, value]

    case Tree.write(dir, h, data, f.mode) do
      {:ok, old} ->
        Capacity.add(f.capacity, size - old)
        :ok

      {:error, reason} ->
        {:error,
         StoreError.new(
           @backend,
           :unavailable,
           "cannot write #{Path.join(shard(h) ++ [h])}: #{describe(reason)}"
         )}
    end
  end

  # Deletes the store's file `h` in `dir`, taking its bytes off the capacity's estimate.
  defp remove_file(f, dir, h) do
    case Tree.remove(dir, h) do
      {:ok, size} ->
        Capacity.add(f.capacity, -size)
        :ok

      other ->
        other
    end
  end

  # Runs `fun.(shard_dir, h)` holding the exclusive flock of the key's shard `.lock`, through flock(1) as a port.
  # `fun` under the shard's lock. The shard is made when missing, and one that cannot be used is the caller's error;
  # with `no_shard` given, a missing or unusable shard is not made and answers `no_shard` instead.
  defp locked(f, skey, fun, no_shard \\ nil) do
    case System.find_executable("flock") do
      nil ->
        {:error,
         StoreError.new(
           @backend,
           :unsupported,
           "flock(1) (util-linux) is needed for add, incr and delete_if"
         )}

      flock ->
        under_lock = fn dir, h ->
          case Tree.touch(dir, ".lock", f.mode) do
            {:ok, id} ->
              hold_lock(flock, dir, id, fn -> fun.(dir, h) end)

            {:error, reason} ->
              {:error,
               StoreError.new(
                 @backend,
                 :unavailable,
                 "#{Path.join(shard(h) ++ [".lock"])}: #{describe(reason)}"
               )}
          end
        end

        if no_shard == nil do
          in_shard_for_write(skey, f, under_lock)
        else
          case in_shard(f, skey, false, under_lock) do
            {:done, result} -> result
            _ -> no_shard
          end
        end
    end
  end

  # The shell opens `.lock` read-only through this process's descriptor of the shard (never creating it, so a link
  # swapped in cannot make it create a file elsewhere), waits for flock(1) on it, prints the device and inode of
  # what it holds, and keeps the lock in `cat` until the port closes. What it holds must be the file `touch` made
  # or found: else something was swapped in between, and the lock is not taken.
  @lock_script ~S(exec 9<"$1" || exit 3; "$2" -x 9 || exit 4; stat -L -c "locked %d %i" /dev/fd/9 || exit 5; exec cat)

  defp hold_lock(flock, dir, {dev, ino}, fun) do
    port =
      Port.open({:spawn_executable, "/bin/sh"}, [
        :binary,
        :exit_status,
        {:line, 256},
        args: ["-c", @lock_script, "larder-lock", Tree.os_path(dir, ".lock"), flock]
      ])

    try do
      receive do
        {^port, {:data, {:eol, "locked " <> held}}} ->
          if held == "#{dev} #{ino}" do
            fun.()
          else
            {:error,
             StoreError.new(
               @backend,
               :unavailable,
               "the shard's .lock changed while it was opened: refused"
             )}
          end

        {^port, {:exit_status, s}} ->
          {:error, StoreError.new(@backend, :unavailable, "flock exited #{s}")}
      after
        @lock_wait_ms ->
          kill(port)

          {:error,
           StoreError.new(
             @backend,
             :timeout,
             "the lock of #{Path.join(dir.path, ".lock")} was not granted in #{div(@lock_wait_ms, 1000)} s"
           )}
      end
    after
      close_port(port)
    end
  end

  # A shell stuck opening what was swapped in (a FIFO) would not notice its port closing.
  defp kill(port) do
    case Port.info(port, :os_pid) do
      {:os_pid, pid} -> System.cmd("kill", ["-KILL", Integer.to_string(pid)])
      _ -> :ok
    end
  end

  defp close_port(port) do
    Port.close(port)
  catch
    _, _ -> :ok
  end

  # Deletes the store's files for which `match?.(key, value)`: the count removed.
  defp count_removed(f, match?) do
    n =
      Scan.each_shard(f.root, fn shard, _a, _b, names ->
        Enum.count(names, fn name ->
          with {:ok, data} <- Tree.read(shard, name),
               {:ok, _exp, key, value} <- parse(data),
               true <- hash(key) == name,
               true <- match?.(key, value),
               {:ok, _} <- Tree.remove(shard, name) do
            true
          else
            _ -> false
          end
        end)
      end)
      |> Enum.sum()

    Capacity.rescan(f.capacity, f.root)
    n
  end
end
