defmodule Larder.Stores.File.Scan do
  @moduledoc """
  Finds the file store's own files under its root (spec/STORES.md §7), for capacity and purges: regular files,
  reached without a link, named `<2 hex>/<2 hex>/<64 hex>` after their first four digits, starting with `LDR1`, with
  a key length that fits the file and a key that hashes to the name. Anything else is foreign: never listed, so
  never counted, read further or deleted.
  """

  @magic "LDR1"

  @doc """
  The paths of the store's own files under `root`: named and placed as the store names them, regular, reached
  without a link, with the magic and a key that fits and hashes to the name. Reads only each file's header and key.
  """
  def candidates(root) do
    for a <- hex_dirs(root),
        b <- hex_dirs(Path.join(root, a)),
        name <- list(Path.join([root, a, b])),
        byte_size(name) == 64 and name =~ ~r/\A[0-9a-f]{64}\z/ and
          binary_part(name, 0, 4) == a <> b,
        p = Path.join([root, a, b, name]),
        ours?(p, name),
        do: p
  end

  defp ours?(path, name) do
    with {:ok, %{type: :regular, size: size}} when size >= 14 <- File.lstat(path),
         {:ok, fd} <- :file.open(path, [:read, :raw, :binary]) do
      try do
        with {:ok, <<@magic, _exp::little-64, len::little-16>>} <- :file.read(fd, 14),
             true <- size >= 14 + len,
             {:ok, key} when byte_size(key) == len <- read_key(fd, len) do
          Base.encode16(:crypto.hash(:sha256, key), case: :lower) == name
        else
          _ -> false
        end
      after
        :file.close(fd)
      end
    else
      _ -> false
    end
  end

  defp read_key(_fd, 0), do: {:ok, ""}
  defp read_key(fd, len), do: :file.read(fd, len)

  defp hex_dirs(dir) do
    for name <- list(dir),
        byte_size(name) == 2 and name =~ ~r/\A[0-9a-f]{2}\z/,
        match?({:ok, %{type: :directory}}, File.lstat(Path.join(dir, name))),
        do: name
  end

  defp list(dir) do
    case File.ls(dir) do
      {:ok, names} -> names
      _ -> []
    end
  end
end
