# The file store's `capacity` (spec/STORES.md §7) on real directories: the bound held after every write, the oldest
# files evicted first down to 90%, concurrent writers of one handle, foreign files never counted or deleted, and a
# directory shared with the Rust binary, whose files Elixir counts and evicts like its own (and the other way).
defmodule Larder.FileCapacityTest do
  use ExUnit.Case, async: true

  alias Larder.{Entry, Store, StoreError}
  alias Larder.Stores.File.{Capacity, Scan}

  @root Path.expand("../../..", __DIR__)

  setup do
    dir = Path.join(System.tmp_dir!(), "larder-ex-capacity-#{System.unique_integer([:positive])}")
    on_exit(fn -> File.rm_rf!(dir) end)
    {:ok, dir: dir}
  end

  # The bytes of the store's own files, counted from the disk.
  defp on_disk(dir), do: dir |> Scan.candidates() |> Enum.map(&File.lstat!(&1).size) |> Enum.sum()

  defp file_of(dir, skey) do
    h = Base.encode16(:crypto.hash(:sha256, skey), case: :lower)
    Path.join([dir, binary_part(h, 0, 2), binary_part(h, 2, 2), h])
  end

  defp age(dir, key, seconds_ago),
    do: File.touch!(file_of(dir, key), System.os_time(:second) - seconds_ago)

  test "the bound holds after every write, and the estimate follows the disk", %{dir: dir} do
    {:ok, s} = Larder.Stores.open("file://#{dir}?capacity=20K")
    value = String.duplicate("v", 1000)

    for i <- 1..100 do
      assert :ok = Store.set(s, "k#{i}", value)
      assert on_disk(dir) <= 20 * 1024
      assert Capacity.estimate(s.ref.capacity) == on_disk(dir)
    end

    # The last written is always kept.
    assert {:ok, ^value} = Store.get(s, "k100")

    # Deletes and purges take their bytes off the estimate.
    {:ok, true} = Store.delete(s, "k100")
    assert Capacity.estimate(s.ref.capacity) == on_disk(dir)
    {:ok, _} = Store.purge_prefix(s, "k")
    assert Capacity.estimate(s.ref.capacity) == 0
  end

  test "the files with the oldest modification time go first, down to 90%", %{dir: dir} do
    {:ok, unbounded} = Larder.Stores.open("file://#{dir}")
    value = String.duplicate("o", 1000)

    for i <- 0..9 do
      :ok = Store.set(unbounded, "old#{i}", value)
      age(dir, "old#{i}", 1000 - i * 10)
    end

    one = File.lstat!(file_of(dir, "old0")).size
    capacity = 15 * one
    {:ok, s} = Larder.Stores.open("file://#{dir}?capacity=#{capacity}")
    assert Capacity.estimate(s.ref.capacity) == 10 * one

    for i <- 0..5, do: :ok = Store.set(s, "new#{i}", value)

    # 16 files passed 15: the oldest go until the total is under 90% (13.5 files): old0, old1 and old2.
    gone = for i <- 0..9, Store.get(s, "old#{i}") == :miss, do: i
    assert gone == [0, 1, 2]
    for i <- 0..5, do: assert({:ok, ^value} = Store.get(s, "new#{i}"))
    assert on_disk(dir) <= div(capacity, 10) * 9
  end

  test "concurrent writers of one handle keep the bound", %{dir: dir} do
    {:ok, s} = Larder.Stores.open("file://#{dir}?capacity=16K")

    1..8
    |> Enum.map(fn w ->
      Task.async(fn ->
        for i <- 1..40, do: :ok = Store.set(s, "w#{w}-#{i}", :crypto.strong_rand_bytes(400))
      end)
    end)
    |> Enum.each(&Task.await(&1, 60_000))

    assert on_disk(dir) <= 16 * 1024
    assert on_disk(dir) > 0
    # No temporary file is left behind.
    assert Path.wildcard(Path.join(dir, "*/*/.*.tmp"), match_dot: true) == []
  end

  test "foreign files are neither counted nor deleted; links are not followed", %{dir: dir} do
    File.mkdir_p!(dir)
    big = String.duplicate("f", 50_000)
    File.write!(Path.join(dir, "notes.txt"), big)

    # Named like a store file but not one: wrong magic, a key that does not hash to the name, a short key length.
    h = Base.encode16(:crypto.hash(:sha256, "mine"), case: :lower)
    shard = Path.join([dir, binary_part(h, 0, 2), binary_part(h, 2, 2)])
    File.mkdir_p!(shard)
    File.write!(Path.join(shard, h), "XXXX" <> big)
    short = binary_part(h, 0, 4) <> String.duplicate("1", 60)
    File.write!(Path.join(shard, short), ["LDR1", <<0::64, 60_000::little-16>>, "mine"])

    other = binary_part(h, 0, 4) <> String.duplicate("0", 60)
    File.write!(Path.join(shard, other), ["LDR1", <<0::64, 4::little-16>>, "mine", big])
    File.write!(Path.join(shard, ".#{h}.x.tmp"), big)
    # A file elsewhere, linked from a store name and from a shard directory.
    outside =
      Path.join(System.tmp_dir!(), "larder-ex-outside-#{System.unique_integer([:positive])}")

    File.mkdir_p!(outside)
    on_exit(fn -> File.rm_rf!(outside) end)
    linked_key = "linked"
    File.write!(Path.join(outside, "secret"), ["LDR1", <<0::64, 6::little-16>>, linked_key, big])
    lf = file_of(dir, linked_key)
    File.mkdir_p!(Path.dirname(lf))
    File.ln_s!(Path.join(outside, "secret"), lf)
    File.ln_s!(outside, Path.join(dir, "ff"))

    {:ok, s} = Larder.Stores.open("file://#{dir}?capacity=8K")
    assert Capacity.estimate(s.ref.capacity) == 0

    for i <- 1..30, do: :ok = Store.set(s, "k#{i}", String.duplicate("v", 500))
    assert on_disk(dir) <= 8 * 1024

    assert File.read!(Path.join(dir, "notes.txt")) == big
    assert File.read!(Path.join(shard, h)) == "XXXX" <> big
    assert File.exists?(Path.join(shard, other))
    assert File.exists?(Path.join(shard, short))
    assert File.exists?(Path.join(shard, ".#{h}.x.tmp"))
    assert {:ok, %{type: :symlink}} = File.lstat(lf)
    assert File.exists?(Path.join(outside, "secret"))
  end

  test "a value over half the capacity is refused; capacity 0 is unbounded; a bad size is an error",
       %{dir: dir} do
    {:ok, s} = Larder.Stores.open("file://#{dir}?capacity=10K")

    assert {:error, %StoreError{kind: :too_large}} =
             Store.set(s, "big", String.duplicate("b", 5 * 1024 + 1))

    assert :miss = Store.get(s, "big")
    assert :ok = Store.set(s, "fits", String.duplicate("b", 5 * 1024))

    {:ok, u} = Larder.Stores.open("file://#{dir}?capacity=0")
    assert u.ref.capacity == nil
    assert :ok = Store.set(u, "huge", String.duplicate("b", 100_000))

    assert {:error, %StoreError{kind: :url, message: message}} =
             Larder.Stores.open("file://#{dir}?capacity=lots")

    assert message =~ "capacity"
  end

  test "the Rust binary's files count and go oldest first; Rust's capacity evicts Elixir's", %{
    dir: dir
  } do
    bin = System.get_env("LARDER_BIN") || Path.join(@root, "target/debug/larder")
    entry = Entry.encode(%{"page" => String.duplicate("r", 2000)}, compressor: :none)
    file = Path.join(dir <> "-entry", "e")
    File.mkdir_p!(Path.dirname(file))
    on_exit(fn -> File.rm_rf!(Path.dirname(file)) end)
    File.write!(file, entry)

    for i <- 0..5 do
      {_, 0} = System.cmd(bin, ["store", "set", "rs#{i}", file, "--store", "file://#{dir}"])
      age(dir, "rs#{i}", 1000 - i * 10)
    end

    one = File.lstat!(file_of(dir, "rs0")).size
    {:ok, s} = Larder.Stores.open("file://#{dir}?capacity=#{8 * one}")
    assert Capacity.estimate(s.ref.capacity) == 6 * one

    for i <- 0..2, do: :ok = Store.set(s, "ex#{i}", entry)
    # 9 files passed 8: Rust's two oldest go (down to 7.2 files); Rust still reads Elixir's.
    assert [0, 1] == for(i <- 0..5, Store.get(s, "rs#{i}") == :miss, do: i)
    {out, 0} = System.cmd(bin, ["store", "get", "ex2", "--store", "file://#{dir}"])
    assert out == entry

    # The other way: Rust, bounded, evicts Elixir's files, oldest first.
    for i <- 0..2, do: age(dir, "ex#{i}", 2000 - i * 10)

    {_, 0} =
      System.cmd(bin, [
        "store",
        "set",
        "rs-last",
        file,
        "--store",
        "file://#{dir}?capacity=#{7 * one}"
      ])

    assert :miss = Store.get(s, "ex0")
    assert {:ok, ^entry} = Store.get(s, "rs-last")
  end
end
