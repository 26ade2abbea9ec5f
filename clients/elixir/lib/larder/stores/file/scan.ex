defmodule Larder.Stores.File.Scan do
  @moduledoc """
  Finds the file store's own files under its root (spec/STORES.md §7), for capacity, purges and `clear`: regular
  files named `<2 hex>/<2 hex>/<64 hex>` after their first four digits, reached without a link at any level
  (`Larder.Stores.File.Tree`: a linked shard directory is not descended into, a linked file is not opened), starting
  with `LDR1`, with a key length that fits the file and a key that hashes to the name. Anything else is foreign:
  never listed, so never counted, read further or deleted.
  """

  alias Larder.Stores.File.Tree

  @magic "LDR1"

  @doc """
  Runs `fun.(shard, a, b, names)` for every shard directory `<root>/<a>/<b>` (opened without following a link), with
  the names there that are named as the store names its files; `fun`'s results, in a list.
  """
  def each_shard(root, fun) do
    case Tree.root(root) do
      {:ok, top} ->
        try do
          Enum.flat_map(hex_names(top), fn a ->
            in_sub(top, a, fn dir_a ->
              Enum.flat_map(hex_names(dir_a), fn b ->
                in_sub(dir_a, b, fn shard -> [fun.(shard, a, b, own_names(shard, a, b))] end)
              end)
            end)
          end)
        after
          Tree.close(top)
        end

      _ ->
        []
    end
  end

  defp own_names(shard, a, b) do
    for n <- Tree.list(shard),
        byte_size(n) == 64 and n =~ ~r/\A[0-9a-f]{64}\z/ and binary_part(n, 0, 4) == a <> b,
        do: n
  end

  defp in_sub(dir, name, fun) do
    case Tree.sub(dir, name) do
      {:ok, sub} ->
        try do
          fun.(sub)
        after
          Tree.close(sub)
        end

      _ ->
        []
    end
  end

  defp hex_names(dir) do
    for name <- Tree.list(dir), byte_size(name) == 2 and name =~ ~r/\A[0-9a-f]{2}\z/, do: name
  end

  @doc """
  The store's own files under `root`: `{a, b, name, size, mtime}` (mtime in POSIX seconds). Reads only each file's
  header and key.
  """
  def entries(root) do
    each_shard(root, fn shard, a, b, names ->
      for name <- names,
          {:ok, stat} <- [ours(shard, name)],
          do: {a, b, name, stat.size, stat.mtime}
    end)
    |> Enum.concat()
  end

  @doc "The paths of the store's own files under `root` (for tests and tools; the store itself uses `entries/1`)."
  def candidates(root),
    do: for({a, b, name, _, _} <- entries(root), do: Path.join([root, a, b, name]))

  @doc "`{:ok, stat}` when `name` in the open `shard` is one of the store's files, else `:no`."
  def ours(shard, name) do
    result =
      Tree.with_file(shard, name, fn fd, stat ->
        with true <- stat.size >= 14,
             {:ok, <<@magic, _exp::little-64, len::little-16>>} <- :file.read(fd, 14),
             true <- stat.size >= 14 + len,
             {:ok, key} when byte_size(key) == len <- read_key(fd, len),
             true <- Base.encode16(:crypto.hash(:sha256, key), case: :lower) == name do
          {:ok, stat}
        else
          _ -> :no
        end
      end)

    if match?({:ok, _}, result), do: result, else: :no
  end

  defp read_key(_fd, 0), do: {:ok, ""}
  defp read_key(fd, len), do: :file.read(fd, len)
end
