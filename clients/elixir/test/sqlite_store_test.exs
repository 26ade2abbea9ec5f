# The SQLite store's own cases (spec/STORES.md §6) beyond the contract every store runs in remote_stores_test.exs:
# rows another writer left (a key under our hash, values of the wrong type, garbage, a value over the bound), a newer
# schema, a file that is not a database, a file another language's process holds or writes at the same time, the
# expiry sweep, and a killed connection. Rows are planted with the driver itself, as a foreign writer would.
defmodule Larder.SQLiteStoreTest do
  use ExUnit.Case, async: true

  alias Larder.{Entry, Store, StoreError}
  alias Larder.Stores.SQLite

  @root Path.expand("../../..", __DIR__)
  @python Path.join(@root, ".venv/bin/python")

  setup do
    path =
      Path.join(System.tmp_dir!(), "larder-ex-sqlite-#{System.unique_integer([:positive])}.db")

    on_exit(fn -> for suffix <- ["", "-wal", "-shm"], do: File.rm(path <> suffix) end)
    %{path: path}
  end

  defp open(path, opts \\ []) do
    {:ok, url} = Store.URL.parse("sqlite://#{path}")
    SQLite.open(url, opts)
  end

  # Runs one statement on a connection of the test's own (a foreign writer).
  defp plant(path, sql, params) do
    {:ok, db} = :sqlite3.open(:anonymous, file: String.to_charlist(path))
    :sqlite3.sql_exec(db, "PRAGMA busy_timeout = 5000")
    result = :sqlite3.sql_exec(db, sql, params)
    :sqlite3.close(db)
    result
  end

  defp python(args) do
    unless File.exists?(@python),
      do: flunk("#{@python} is missing: run make venv at the repository root")

    System.cmd(@python, args,
      stderr_to_stdout: true,
      env: [{"PYTHONPATH", Path.join(@root, "clients/python/src")}]
    )
  end

  test "a row of another key under the key's hash is a miss, and a write replaces it", %{
    path: path
  } do
    {:ok, s} = open(path)
    assert :ok = Store.set(s, "warm", "up")

    plant(
      path,
      "INSERT INTO larder_entries (key_hash, key, value, byte_size, created_at) VALUES (?, ?, ?, 1, 0)",
      [SQLite.key_hash("mine"), "theirs", {:blob, "foreign"}]
    )

    assert :miss = Store.get(s, "mine")
    assert {:ok, %{}} = Store.get_many(s, ["mine"])
    assert {:ok, false} = Store.delete(s, "mine")
    assert :ok = Store.set(s, "mine", "ours")
    assert {:ok, "ours"} = Store.get(s, "mine")
  end

  test "values of the wrong type or not entries are typed errors, text is bytes", %{path: path} do
    {:ok, s} = open(path)
    assert :ok = Store.set(s, "n", "x")
    assert :ok = Store.set(s, "t", "x")
    assert :ok = Store.set(s, "g", "x")
    assert :ok = Store.set(s, "e", "x")
    plant(path, "UPDATE larder_entries SET value = 42 WHERE key = ?", ["n"])
    plant(path, "UPDATE larder_entries SET value = ? WHERE key = ?", ["text", "t"])

    plant(path, "UPDATE larder_entries SET value = ? WHERE key = ?", [{:blob, "LDR\x01junk"}, "g"])

    plant(path, "UPDATE larder_entries SET expires_at = 'soon' WHERE key = ?", ["e"])

    assert {:error, %StoreError{kind: :malformed, backend: "sqlite"}} = Store.get(s, "n")
    assert {:ok, "text"} = Store.get(s, "t")
    assert {:ok, junk} = Store.get(s, "g")
    assert {:error, {_kind, _}} = Entry.decode(junk)
    assert {:error, %StoreError{kind: :malformed}} = Store.get(s, "e")
    assert {:error, %StoreError{kind: :not_a_counter}} = Store.incr(s, "n", 1)
  end

  test "a value over max_value is refused on write and never loaded on read", %{path: path} do
    {:ok, small} = open(path, max_value: 1000)
    {:ok, big} = open(path)
    value = :crypto.strong_rand_bytes(5000)
    assert {:error, %StoreError{kind: :too_large}} = Store.set(small, "big", value)
    assert :miss = Store.get(big, "big")
    assert :ok = Store.set(big, "big", value)
    assert {:ok, ^value} = Store.get(big, "big")
    assert {:error, %StoreError{kind: :too_large, message: m}} = Store.get(small, "big")
    assert m =~ "5000 bytes"
    assert {:error, %StoreError{kind: :too_large}} = Store.get_many(small, ["big"])
  end

  test "a database of a newer schema is refused, naming both versions", %{path: path} do
    {:ok, _} = open(path)
    plant(path, "UPDATE larder_entries_schema SET version = 2", [])
    assert {:error, %StoreError{kind: :server, message: m}} = open(path)
    assert m =~ "version 2" and m =~ "larder's 1"

    # Another table in the same file has its own schema row.
    {:ok, url} = Store.URL.parse("sqlite://#{path}?table=other")
    assert {:ok, s} = SQLite.open(url)
    assert :ok = Store.set(s, "k", "v")
  end

  test "a file that is not a database, a missing directory and bad URLs are typed errors", %{
    path: path
  } do
    File.write!(path, :binary.copy("not a database ", 400))
    assert {:error, %StoreError{kind: :unavailable, message: m}} = open(path)
    assert m =~ "not a database"
    assert File.read!(path) == :binary.copy("not a database ", 400)

    assert {:error, %StoreError{kind: :unavailable}} =
             Larder.Stores.open("sqlite:///nonexistent-larder-dir/x.db")

    # A directory is not a file the driver can open.
    assert {:error, %StoreError{kind: :unavailable}} = open(Path.dirname(path))

    for bad <- [
          "sqlite://host/x.db",
          "sqlite:///",
          "sqlite://#{path}?table=Bad-Name",
          "sqlite://#{path}?timeout=1s",
          "sqlite://#{path}?prefix=a%20b"
        ] do
      assert {:error, %StoreError{kind: :url}} = Larder.Stores.open(bad), bad
    end

    assert {:error, %StoreError{kind: :unsupported, message: m}} =
             Larder.Stores.open("postgres://larder@127.0.0.1:5432/cache")

    assert m =~ "erlang-p1-pgsql"
  end

  test "a file another process holds: the write waits for it, or fails by its deadline", %{
    path: path
  } do
    {:ok, s} = open(path)
    {:ok, quick} = open(path, timeout: 300)
    assert :ok = Store.set(s, "k", "before")

    # Python takes the file's write lock, says so, holds it `seconds`, then commits.
    hold = fn seconds ->
      port =
        Port.open({:spawn_executable, @python}, [
          :binary,
          :exit_status,
          {:line, 200},
          env: [{~c"PYTHONPATH", ~c""}],
          args: [
            "-c",
            "import sqlite3, sys, time\n" <>
              "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n" <>
              "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(float(sys.argv[2]))\n" <>
              "c.execute('COMMIT')",
            path,
            "#{seconds}"
          ]
        ])

      assert_receive {^port, {:data, {:eol, "held"}}}, 10_000
      port
    end

    finished = fn port -> assert_receive {^port, {:exit_status, 0}}, 10_000 end

    holder = hold.(1.5)
    {micros, result} = :timer.tc(fn -> Store.set(s, "k", "after") end)
    assert :ok = result
    assert micros > 200_000
    finished.(holder)
    assert {:ok, "after"} = Store.get(s, "k")

    holder = hold.(3)
    {micros, result} = :timer.tc(fn -> Store.set(quick, "k2", "v") end)
    assert {:error, %StoreError{kind: :timeout, server: ^path}} = result
    assert micros < 1_500_000

    # A request queued behind the waiting one, whose caller gives up too, is not done late.
    assert {:error, %StoreError{kind: :timeout}} = Store.set(quick, "k3", "late")
    finished.(holder)
    assert :miss = Store.get(s, "k3")
  end

  test "counters incremented by Python and Elixir at the same time lose nothing", %{path: path} do
    {:ok, s} = open(path)

    python_side =
      Task.async(fn ->
        python([
          "-c",
          "import sys\nfrom larder import open_store\ns = open_store(sys.argv[1])\n" <>
            "for _ in range(150): s.incr('shared', 1)\nprint(s.incr('shared', 0))",
          "sqlite://#{path}"
        ])
      end)

    elixir_side =
      for _ <- 1..3,
          do: Task.async(fn -> for _ <- 1..50, do: {:ok, _} = Store.incr(s, "shared", 1) end)

    Enum.each(elixir_side, &Task.await(&1, 60_000))
    assert {out, 0} = Task.await(python_side, 60_000)
    assert String.trim(out) |> String.split("\n") |> List.last() |> String.to_integer() >= 150
    assert {:ok, 300} = Store.incr(s, "shared", 0)
  end

  test "about one write in 100 sweeps expired rows", %{path: path} do
    {:ok, s} = open(path)
    past = Store.now_ms() - 1000

    for i <- 1..20 do
      plant(
        path,
        "INSERT INTO larder_entries (key_hash, key, value, byte_size, created_at, expires_at)" <>
          " VALUES (?, ?, ?, 1, 0, ?)",
        [SQLite.key_hash("old#{i}"), "old#{i}", {:blob, "x"}, past]
      )
    end

    for i <- 1..100, do: assert(:ok = Store.set(s, "new#{i}", "v"))

    assert [columns: _, rows: [{0}]] =
             plant(path, "SELECT COUNT(*) FROM larder_entries WHERE expires_at <= ?", [past])
  end

  test "a killed connection is reopened; callers get values or errors, never a crash", %{
    path: path
  } do
    {:ok, s} = open(path)
    assert :ok = Store.set(s, "k", "v")
    [{pid, _}] = Registry.lookup(Larder.Pools, {SQLite, path})
    Process.exit(pid, :kill)

    results = for _ <- 1..20, do: Task.async(fn -> Store.get(s, "k") end)

    for r <- Enum.map(results, &Task.await/1),
        do: assert(r == {:ok, "v"} or match?({:error, %StoreError{}}, r))

    assert Enum.any?(1..100, fn _ ->
             Process.sleep(10)
             Store.get(s, "k") == {:ok, "v"}
           end)

    assert [{new, _}] = Registry.lookup(Larder.Pools, {SQLite, path})
    assert new != pid
  end
end
