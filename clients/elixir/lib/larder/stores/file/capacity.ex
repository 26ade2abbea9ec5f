defmodule Larder.Stores.File.Capacity do
  @moduledoc """
  The file store's `capacity` (spec/STORES.md §7): a writer that sees the bytes of the store's files past it deletes
  the files with the oldest modification time until the total is under 90% of it, as the Rust, Python and Go file
  stores do. Each handle keeps an estimate of the total in `:atomics` (shared by every process using the handle),
  taken by a scan when the directory is opened and every minute after, and moved by its own writes and deletes.

  Only the store's own files are scanned, counted and evicted (`Larder.Stores.File.Scan`): everything else under the
  root is foreign and left alone, and a file is deleted through its shard directory opened without a link
  (`Larder.Stores.File.Tree`), so a shard directory swapped for a link after the scan redirects nothing.

  Erlang reports modification times in whole seconds: files written within one second are evicted in no set order
  among themselves.
  """

  alias Larder.Stores.File.{Scan, Tree}

  defstruct [:bytes, :usage]

  @rescan_every_ms 60_000
  # Slots of the :atomics: the estimated total, when it was last scanned (ms), 1 while a process evicts.
  @total 1
  @scanned_at 2
  @evicting 3
  # Eviction passes one writer makes before leaving the rest to the next writer.
  @max_rounds 3

  @doc "A bound of `bytes` (a positive integer) on the store's files under `root`, scanned now."
  def new(root, bytes) when is_integer(bytes) and bytes > 0 do
    c = %__MODULE__{bytes: bytes, usage: :atomics.new(3, signed: true)}
    rescan(c, root)
    c
  end

  @doc "Adds `delta` bytes to the estimate (a write, or a negative delete)."
  def add(nil, _delta), do: :ok
  def add(%__MODULE__{usage: u}, delta), do: :atomics.add(u, @total, delta)

  @doc "The estimated total of the store's files."
  def estimate(%__MODULE__{usage: u}), do: :atomics.get(u, @total)

  @doc "After a write: evicts the oldest files when the estimate is past the bound (nothing when unbounded)."
  def enforce(nil, _root), do: :ok

  def enforce(%__MODULE__{usage: u} = c, root) do
    if Larder.Store.now_ms() - :atomics.get(u, @scanned_at) > @rescan_every_ms,
      do: rescan(c, root)

    enforce(c, root, @max_rounds)
  end

  defp enforce(_c, _root, 0), do: :ok

  defp enforce(%__MODULE__{usage: u} = c, root, rounds) do
    # One evictor per handle at a time; a writer that finds one at work leaves it the job, and the evictor looks
    # again after it stops, so a write made meanwhile is not left past the bound.
    if :atomics.get(u, @total) > c.bytes and :atomics.compare_exchange(u, @evicting, 0, 1) == :ok do
      try do
        evict(c, root)
      after
        :atomics.put(u, @evicting, 0)
      end

      enforce(c, root, rounds - 1)
    else
      :ok
    end
  end

  defp evict(%__MODULE__{usage: u} = c, root) do
    before = :atomics.get(u, @total)
    files = Scan.entries(root)
    scanned = Enum.reduce(files, 0, fn {_, _, _, size, _}, n -> n + size end)
    target = div(c.bytes, 10) * 9

    left =
      files
      |> Enum.sort_by(fn {_, _, _, _, mtime} -> mtime end)
      |> Enum.reduce_while(scanned, fn {a, b, name, size, _}, total ->
        cond do
          total <= target ->
            {:halt, total}

          match?({:ok, _}, Tree.within(root, [a, b], nil, &Tree.remove(&1, name))) ->
            {:cont, total - size}

          true ->
            {:cont, total}
        end
      end)

    # Corrects the estimate to the scan less what was removed, keeping what other processes of this handle added
    # while it ran (a write between reading `before` and the scan is counted twice: the estimate errs high, towards
    # evicting).
    :atomics.add(u, @total, left - before)
    :atomics.put(u, @scanned_at, Larder.Store.now_ms())
  end

  @doc "Takes the estimate from a scan (after a purge, and every minute)."
  def rescan(nil, _root), do: :ok

  def rescan(%__MODULE__{usage: u}, root) do
    total = root |> Scan.entries() |> Enum.reduce(0, fn {_, _, _, s, _}, n -> n + s end)

    :atomics.put(u, @total, total)
    :atomics.put(u, @scanned_at, Larder.Store.now_ms())
  end
end
