defmodule Larder.Stores.File.Tree do
  @moduledoc """
  The file store's directories and files below its root, reached without ever following a link (spec/STORES.md §7;
  a link in any component below the root is never read, written, deleted or descended into). The root is opened as
  it is named (operators may make it a link); below it, each shard directory and file is looked at with lstat,
  opened, and used only if what was opened is what lstat saw (same device and inode, the right type), so a component
  swapped for a link between the look and the open is caught. Everything after that names files through the open
  directory, `/proc/self/fd/<fd>/<name>`: Linux resolves that from the directory the descriptor holds, not from its
  path, so a parent swapped for a link later redirects nothing (openat(2), for a runtime whose file module has
  neither openat nor O_NOFOLLOW).

  Files and directories this module creates get the store's `mode` through their own descriptor (fchmod through
  `/proc/self/fd`), so the mode is never set on what a link points to.

  Requires Linux's `/proc/self/fd` (`available?/0`).
  """

  import Bitwise

  defstruct [:fd, :path]

  @type t :: %__MODULE__{fd: term(), path: binary()}

  @doc "Whether this system names open descriptors under `/proc/self/fd` (Linux)."
  def available?, do: match?({:ok, %{type: :directory}}, File.stat("/proc/self/fd"))

  @doc "The directory mode for a file `mode`: a search (x) bit wherever the mode has a read bit."
  def dir_mode(mode), do: mode ||| (mode &&& 0o444) >>> 2

  @doc """
  Opens the store's root (following a link there: the root may be one): `{:ok, dir}` or `{:error, reason}`.
  Close it with `close/1`.
  """
  def root(path) do
    with {:ok, fd} <- :file.open(path, [:read, :raw, :binary, :directory]) do
      case wrap_dir(fd) do
        {:ok, dir} ->
          {:ok, dir}

        e ->
          :file.close(fd)
          e
      end
    end
  end

  @doc """
  Opens directory `name` in `dir` without following a link: `{:ok, dir}`, `:missing`, or `{:error, reason}`
  (`:link` for a link or an entry swapped while it was opened, `:not_a_directory`). With `create_mode`, a missing
  directory is made, with that mode.
  """
  def sub(%__MODULE__{} = dir, name, create_mode \\ nil) do
    child = child(dir, name)
    created = create_mode != nil and :file.make_dir(child) == :ok

    with {:ok, seen} <- lstat(child),
         :ok <- expect_type(seen, :directory),
         {:ok, fd} <- open(child, [:read, :raw, :binary, :directory]) do
      with :ok <- same(fd, seen),
           :ok <- if(created, do: chmod(fd, create_mode), else: :ok),
           {:ok, sub} <- wrap_dir(fd) do
        {:ok, sub}
      else
        e ->
          :file.close(fd)
          e
      end
    end
  end

  @doc "Sets the mode of an open directory (through its descriptor)."
  def set_mode(%__MODULE__{fd: fd}, mode), do: chmod(fd, mode)

  @doc "Closes an open directory."
  def close(%__MODULE__{fd: fd}), do: :file.close(fd)

  @doc """
  Runs `fun.(dir)` in the directory `names` below `root` (each opened with `sub/3`, made with `create_mode` when
  given), closing every descriptor after. `:missing` or `{:error, reason}` when a component is missing, a link
  or not a directory.
  """
  def within(root_path, names, create_mode, fun) do
    case root(root_path) do
      {:ok, top} -> descend(top, names, create_mode, fun)
      {:error, :enoent} -> :missing
      {:error, _} = e -> e
    end
  end

  defp descend(dir, [], _create_mode, fun) do
    fun.(dir)
  after
    close(dir)
  end

  defp descend(dir, [name | rest], create_mode, fun) do
    case sub(dir, name, create_mode) do
      {:ok, next} -> descend(next, rest, create_mode, fun)
      other -> other
    end
  after
    close(dir)
  end

  @doc "The names in `dir` (nothing for a directory that cannot be listed)."
  def list(%__MODULE__{path: p}) do
    case :file.list_dir_all(p) do
      {:ok, names} -> Enum.map(names, &IO.chardata_to_string/1)
      _ -> []
    end
  end

  @doc "lstat of `name` in `dir` (times in POSIX seconds): `{:ok, %File.Stat{}}`, `:missing` or `{:error, reason}`."
  def stat(%__MODULE__{} = dir, name), do: lstat(child(dir, name))

  @doc """
  Opens the regular file `name` in `dir` for reading, without following a link, and runs `fun.(fd, stat)`:
  `:missing` for anything but a regular file there (a link, a FIFO, a directory), or when it was swapped while
  it was opened. A FIFO is never opened.
  """
  def with_file(%__MODULE__{} = dir, name, fun) do
    path = child(dir, name)

    with {:ok, seen} <- lstat(path),
         :ok <- expect_type(seen, :regular),
         {:ok, fd} <- open(path, [:read, :raw, :binary]) do
      try do
        if same(fd, seen) == :ok, do: fun.(fd, seen), else: :missing
      after
        :file.close(fd)
      end
    else
      _ -> :missing
    end
  end

  @doc "The whole regular file `name` in `dir`: `{:ok, bytes}` or `:missing` (as `with_file/3`)."
  def read(%__MODULE__{} = dir, name) do
    with_file(dir, name, fn fd, _ -> read_all(fd, []) end)
  end

  defp read_all(fd, acc) do
    case :file.read(fd, 1 <<< 22) do
      {:ok, data} -> read_all(fd, [acc | data])
      :eof -> {:ok, IO.iodata_to_binary(acc)}
      {:error, _} -> :missing
    end
  end

  @doc """
  Writes `data` to `name` in `dir` with `mode`: a temporary file (`.<name>.<random>.tmp`, created exclusively, so
  never through a link) renamed over the name. A link or anything but a regular file at the name is left as it is
  and the write is `{:error, :not_regular}`. `{:ok, old_size}` (0 when there was no file).
  """
  def write(%__MODULE__{} = dir, name, data, mode) do
    path = child(dir, name)

    old =
      case lstat(path) do
        {:ok, %{type: :regular, size: size}} -> {:ok, size}
        :missing -> {:ok, 0}
        {:ok, _} -> {:error, :not_regular}
        {:error, _} = e -> e
      end

    with {:ok, old_size} <- old do
      tmp =
        child(dir, ".#{name}.#{Base.encode16(:crypto.strong_rand_bytes(6), case: :lower)}.tmp")

      with {:ok, fd} <- :file.open(tmp, [:write, :exclusive, :raw, :binary]) do
        result =
          try do
            with :ok <- chmod(fd, mode), do: :file.write(fd, data)
          after
            :file.close(fd)
          end

        with :ok <- result,
             :ok <- :file.rename(tmp, path) do
          {:ok, old_size}
        else
          e ->
            :file.delete(tmp)
            e
        end
      end
    end
  end

  @doc """
  Creates `name` in `dir` as an empty regular file with `mode` if it is missing (never through a link):
  `{:ok, {device, inode}}` of the regular file there, or `{:error, reason}` (`:not_regular` for a link, a FIFO…).
  """
  def touch(%__MODULE__{} = dir, name, mode) do
    path = child(dir, name)

    case :file.open(path, [:write, :exclusive, :raw, :binary]) do
      {:ok, fd} ->
        chmodded = chmod(fd, mode)
        :file.close(fd)
        with :ok <- chmodded, do: identity(path)

      {:error, :eexist} ->
        identity(path)

      {:error, _} = e ->
        e
    end
  end

  defp identity(path) do
    case lstat(path) do
      {:ok, %{type: :regular} = s} -> {:ok, {s.major_device, s.inode}}
      {:ok, _} -> {:error, :not_regular}
      :missing -> {:error, :enoent}
      e -> e
    end
  end

  @doc """
  Deletes `name` in `dir` if it is a regular file (unlink never follows the name itself): `{:ok, size}`, or
  `:missing` for nothing there or anything else (a link is left alone).
  """
  def remove(%__MODULE__{} = dir, name) do
    path = child(dir, name)

    with {:ok, %{type: :regular, size: size}} <- lstat(path),
         :ok <- :file.delete(path) do
      {:ok, size}
    else
      _ -> :missing
    end
  end

  @doc "The path of `name` inside `dir`, through its descriptor: for programs run on this machine (flock(1))."
  def os_path(%__MODULE__{path: "/proc/self/" <> rest}, name),
    do: "/proc/#{System.pid()}/#{rest}/#{name}"

  # ------------------------------------------------------------------------------------------------ helpers

  defp child(%__MODULE__{path: p}, name), do: p <> "/" <> name

  defp lstat(path) do
    case :file.read_link_info(path, [:raw, time: :posix]) do
      {:ok, info} -> {:ok, File.Stat.from_record(info)}
      {:error, :enoent} -> :missing
      {:error, :enotdir} -> :missing
      {:error, _} = e -> e
    end
  end

  defp expect_type(%{type: t}, t), do: :ok
  defp expect_type(%{type: :symlink}, _), do: {:error, :link}
  defp expect_type(_, :directory), do: {:error, :not_a_directory}
  defp expect_type(_, _), do: {:error, :not_regular}

  defp open(path, modes) do
    case :file.open(path, modes) do
      {:ok, fd} -> {:ok, fd}
      {:error, e} when e in [:enoent, :enotdir] -> :missing
      {:error, _} = e -> e
    end
  end

  # Whether the open `fd` is the object lstat saw (`seen`): `:ok`, or `{:error, :link}` (something was swapped in
  # between: a link followed by the open, or another file).
  defp same(fd, seen) do
    case :file.read_file_info(fd, time: :posix) do
      {:ok, info} ->
        opened = File.Stat.from_record(info)

        if opened.type == seen.type and opened.major_device == seen.major_device and
             opened.inode == seen.inode,
           do: :ok,
           else: {:error, :link}

      {:error, _} = e ->
        e
    end
  end

  defp wrap_dir(fd) do
    with {:ok, path} <- fd_path(fd), do: {:ok, %__MODULE__{fd: fd, path: path}}
  end

  # `/proc/self/fd/<n>` of an open raw file (prim_file's handle is the descriptor as a native int).
  defp fd_path(fd) do
    case :prim_file.get_handle(fd) do
      <<n::native-signed-32>> when n >= 0 -> {:ok, "/proc/self/fd/#{n}"}
      _ -> {:error, :no_descriptor}
    end
  rescue
    _ -> {:error, :no_descriptor}
  end

  # chmod through the descriptor itself: what was opened gets the mode, never what a name points to.
  defp chmod(fd, mode) do
    with {:ok, p} <- fd_path(fd), do: :file.change_mode(p, mode)
  end
end
