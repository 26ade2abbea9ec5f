# The file store against a hostile directory (issue 32, finding 2 and 6; spec/STORES.md §7): the files it creates are
# 0600 and its directories 0700 unless the URL's `mode=` says otherwise; a symbolic link in any component below the
# root (a shard directory at either level, an entry, the shard's .lock) or a FIFO is never followed by any operation
# (get, set, add, incr, delete, delete_if, purges, clear, capacity eviction), and the link and what it points to are
# left exactly as they were; a shard directory swapped for a link while the store works lets nothing through.
defmodule Larder.FileLinksTest do
  use ExUnit.Case, async: true

  import Bitwise

  alias Larder.{Entry, Store, StoreError}

  setup do
    base = Path.join(System.tmp_dir!(), "larder-ex-links-#{System.unique_integer([:positive])}")
    outside = Path.join(base, "outside")
    File.mkdir_p!(outside)
    on_exit(fn -> File.rm_rf!(base) end)
    %{base: base, root: Path.join(base, "root"), outside: outside}
  end

  defp hash(skey), do: Base.encode16(:crypto.hash(:sha256, skey), case: :lower)

  defp shard(key) do
    h = hash(key)
    {binary_part(h, 0, 2), binary_part(h, 2, 2), h}
  end

  # A file of the store's own form (spec/STORES.md §7), as a planted one would be.
  defp store_form(skey, value), do: ["LDR1", <<0::64, byte_size(skey)::little-16>>, skey, value]

  defp mode(path), do: File.lstat!(path).mode &&& 0o7777

  # Everything under `dir`, without following a link: what a link points to is its target's name, not its content.
  defp snapshot(path) do
    case File.lstat(path) do
      {:ok, %{type: :directory}} ->
        {:dir, Map.new(File.ls!(path), &{&1, snapshot(Path.join(path, &1))})}

      {:ok, %{type: :symlink}} ->
        {:link, File.read_link!(path)}

      {:ok, %{type: :regular} = s} ->
        {:file, File.read!(path), s.mode &&& 0o7777}

      {:ok, %{type: t}} ->
        {t}

      {:error, _} ->
        :none
    end
  end

  # Keys whose files would not land in shard directory `a`.
  defp keys_not_in(a, n) do
    Stream.iterate(0, &(&1 + 1))
    |> Stream.map(&"other#{&1}")
    |> Stream.reject(&(binary_part(hash(&1), 0, 2) == a))
    |> Enum.take(n)
  end

  test "files are 0600 and directories 0700 unless mode= says otherwise; the root may be a link",
       ctx do
    {:ok, s} = Larder.Stores.open("file://#{ctx.root}")
    {a, b, h} = shard("k")
    assert :ok = Store.set(s, "k", "v")
    assert {:ok, true} = Store.add(s, "lock", "t", 60_000)
    {la, lb, _} = shard("lock")

    assert mode(ctx.root) == 0o700
    assert mode(Path.join(ctx.root, a)) == 0o700
    assert mode(Path.join([ctx.root, a, b])) == 0o700
    assert mode(Path.join([ctx.root, a, b, h])) == 0o600
    assert mode(Path.join([ctx.root, la, lb, ".lock"])) == 0o600

    for {option, file_mode, dir_mode} <- [{"0640", 0o640, 0o750}, {"660", 0o660, 0o770}] do
      root = Path.join(ctx.base, "m#{option}")
      {:ok, s} = Larder.Stores.open("file://#{root}?mode=#{option}")
      assert :ok = Store.set(s, "k", "v")
      assert {:ok, 1} = Store.incr(s, "n", 1)
      {na, nb, _} = shard("n")
      assert mode(root) == dir_mode
      assert mode(Path.join(root, a)) == dir_mode
      assert mode(Path.join([root, a, b])) == dir_mode
      assert mode(Path.join([root, a, b, h])) == file_mode
      assert mode(Path.join([root, na, nb, ".lock"])) == file_mode
    end

    # An operator's root that is a link is used as it is.
    File.ln_s!(ctx.root, Path.join(ctx.base, "root-link"))
    {:ok, via_link} = Larder.Stores.open("file://#{Path.join(ctx.base, "root-link")}")
    assert {:ok, "v"} = Store.get(via_link, "k")
    assert :ok = Store.set(via_link, "k2", "v2")
    {a2, b2, h2} = shard("k2")
    assert mode(Path.join([ctx.root, a2, b2, h2])) == 0o600
  end

  test "a mode that does not give the owner read and write, or is not three or four octal digits, is a URL error",
       ctx do
    for bad <- ~w(0400 0200 0060 200 0644x 64 06440 0999 4600 1600 rw) do
      assert {:error, %StoreError{kind: :url, message: m}} =
               Larder.Stores.open("file://#{ctx.root}?mode=#{bad}")

      assert m =~ "mode"
    end

    refute File.exists?(ctx.root)
  end

  # Each way a link can sit below the root, planted so that following it would read, write or delete outside.
  @placements [
    first_shard: "<root>/<a> is a link to a directory holding <b>/<h>",
    second_shard: "<root>/<a>/<b> is a link to a directory holding <h>",
    entry: "<root>/<a>/<b>/<h> is a link to a file of the store's form",
    dangling_entry: "<root>/<a>/<b>/<h> is a link to a name that does not exist"
  ]

  defp plant(:first_shard, root, outside, {a, b, h}) do
    File.mkdir_p!(Path.join(outside, b))
    File.write!(Path.join([outside, b, h]), store_form("k", "planted"))
    File.mkdir_p!(root)
    File.ln_s!(outside, Path.join(root, a))
  end

  defp plant(:second_shard, root, outside, {a, b, h}) do
    File.write!(Path.join(outside, h), store_form("k", "planted"))
    File.mkdir_p!(Path.join(root, a))
    File.ln_s!(outside, Path.join([root, a, b]))
  end

  defp plant(:entry, root, outside, {a, b, h}) do
    File.write!(Path.join(outside, "planted"), store_form("k", "planted"))
    File.mkdir_p!(Path.join([root, a, b]))
    File.ln_s!(Path.join(outside, "planted"), Path.join([root, a, b, h]))
  end

  defp plant(:dangling_entry, root, outside, {a, b, h}) do
    File.mkdir_p!(Path.join([root, a, b]))
    File.ln_s!(Path.join(outside, "created-through-the-link"), Path.join([root, a, b, h]))
  end

  for {placement, what} <- @placements do
    test "#{what}: no operation reads, writes or deletes through it, and the link and its target stay",
         ctx do
      {a, _, _} = parts = shard("k")
      plant(unquote(placement), ctx.root, ctx.outside, parts)
      outside_before = snapshot(ctx.outside)
      {:ok, s} = Larder.Stores.open("file://#{ctx.root}?capacity=4K")
      now = Store.now_ms()
      expired = Entry.encode("x", created_at: now - 9000, expires_at: now - 5000)

      assert :miss = Store.get(s, "k")
      assert {:ok, found} = Store.get_many(s, ["k"])
      assert found == %{}
      assert {:error, %StoreError{kind: :unavailable}} = Store.set(s, "k", "mine")
      assert :ok = Store.set(s, "k", expired)
      assert {:ok, false} = Store.delete(s, "k")

      # Operations under the shard's lock: a write through a linked shard is refused; a linked entry is a miss under
      # a real lock; delete_if, a delete, is a no-op either way (spec/STORES.md §7).
      for result <- [Store.add(s, "k", "mine"), Store.incr(s, "k", 1)] do
        assert match?({:error, %StoreError{kind: :unavailable}}, result) or
                 result in [{:ok, false}],
               inspect(result)
      end

      assert {:ok, false} = Store.delete_if(s, "k", "planted")

      # Other keys fill the capacity (4K) several times over, so eviction scans and deletes; then the purges and
      # clear walk everything.
      for k <- keys_not_in(a, 40), do: assert(:ok = Store.set(s, k, String.duplicate("v", 400)))
      assert {:ok, _} = Store.purge_tag(s, "t")
      assert {:ok, _} = Store.purge_prefix(s, "")
      assert :ok = Store.clear(s)
      assert :miss = Store.get(s, "k")

      assert snapshot(ctx.outside) == outside_before

      link =
        Path.join([ctx.root | Tuple.to_list(parts) |> Enum.take(link_depth(unquote(placement)))])

      assert {:ok, %{type: :symlink}} = File.lstat(link)
    end
  end

  defp link_depth(:first_shard), do: 1
  defp link_depth(:second_shard), do: 2
  defp link_depth(_), do: 3

  test "a shard's .lock that is a link or a FIFO: add, incr and delete_if are refused and nothing is created",
       ctx do
    {:ok, s} = Larder.Stores.open("file://#{ctx.root}")
    {a, b, _} = shard("k")
    shard_dir = Path.join([ctx.root, a, b])
    File.mkdir_p!(shard_dir)
    File.write!(Path.join(ctx.outside, "lock"), "")
    outside_before = snapshot(ctx.outside)

    for target <- ["lock", "missing"] do
      File.rm(Path.join(shard_dir, ".lock"))
      File.ln_s!(Path.join(ctx.outside, target), Path.join(shard_dir, ".lock"))

      for result <- [Store.add(s, "k", "v"), Store.incr(s, "k", 1), Store.delete_if(s, "k", "v")] do
        assert {:error, %StoreError{kind: :unavailable}} = result
      end

      assert snapshot(ctx.outside) == outside_before
    end

    File.rm!(Path.join(shard_dir, ".lock"))
    {_, 0} = System.cmd("mkfifo", [Path.join(shard_dir, ".lock")])
    {micros, result} = :timer.tc(fn -> Store.add(s, "k", "v") end)
    assert {:error, %StoreError{kind: :unavailable}} = result
    assert micros < 5_000_000
    assert {:ok, %{type: :other}} = File.lstat(Path.join(shard_dir, ".lock"))
  end

  test "a FIFO where an entry should be is a miss at once and is never replaced", ctx do
    {:ok, s} = Larder.Stores.open("file://#{ctx.root}")
    {a, b, h} = shard("k")
    File.mkdir_p!(Path.join([ctx.root, a, b]))
    fifo = Path.join([ctx.root, a, b, h])
    {_, 0} = System.cmd("mkfifo", [fifo])

    {micros, _} =
      :timer.tc(fn ->
        assert :miss = Store.get(s, "k")
        assert {:error, %StoreError{kind: :unavailable}} = Store.set(s, "k", "v")
        assert {:ok, false} = Store.delete(s, "k")
        assert {:error, %StoreError{kind: :unavailable}} = Store.add(s, "k", "v")
        assert :ok = Store.clear(s)
      end)

    assert micros < 10_000_000
    assert {:ok, %{type: :other}} = File.lstat(fifo)
  end

  test "a shard directory swapped for a link and back while the store reads and writes lets nothing through",
       ctx do
    {:ok, s} = Larder.Stores.open("file://#{ctx.root}")
    {a, b, h} = shard("k")
    # Keys in the same first-level shard directory as "k", to write while it is swapped.
    same_a =
      Stream.iterate(0, &(&1 + 1))
      |> Stream.map(&"near#{&1}")
      |> Stream.filter(&(binary_part(hash(&1), 0, 2) == a))
      |> Enum.take(4)

    assert :ok = Store.set(s, "k", "real")
    File.mkdir_p!(Path.join(ctx.outside, b))
    File.write!(Path.join([ctx.outside, b, h]), store_form("k", "planted"))
    outside_before = snapshot(ctx.outside)

    real = Path.join(ctx.root, a)
    aside = Path.join(ctx.base, "aside")
    link = Path.join(ctx.base, "link")
    File.ln_s!(ctx.outside, link)
    parent = self()

    swapper =
      spawn_link(fn ->
        swap = fn swap, n ->
          receive do
            :stop -> send(parent, {:swapped, n})
          after
            0 ->
              # real → aside, link → real; then back. A step that fails (the store made the directory again
              # meanwhile) is put right before going on.
              File.rename(real, aside)
              File.rename(link, real)
              File.rename(real, link)
              if File.rename(aside, real) != :ok, do: File.rm_rf!(aside)
              swap.(swap, n + 1)
          end
        end

        swap.(swap, 0)
      end)

    deadline = System.monotonic_time(:millisecond) + 2_000

    outcomes =
      Stream.repeatedly(fn ->
        [Store.get(s, "k"), Store.set(s, Enum.random(same_a), "mine"), Store.add(s, "k", "mine")]
      end)
      |> Stream.take_while(fn _ -> System.monotonic_time(:millisecond) < deadline end)
      |> Enum.to_list()
      |> List.flatten()

    send(swapper, :stop)
    assert_receive {:swapped, swaps}, 5_000
    assert swaps > 10

    refute Enum.any?(outcomes, &(&1 == {:ok, "planted"}))
    assert snapshot(ctx.outside) == outside_before
  end
end
