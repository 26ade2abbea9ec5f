defmodule Larder.Stores.SQLite.Connection do
  @moduledoc """
  The one connection of this node to an SQLite file, through Debian's `erlang-p1-sqlite3` (module `:sqlite3`, a
  port driver whose every statement runs on the VM's async thread pool, not on a scheduler). A GenServer owns the
  driver's process and runs each operation of `Larder.Stores.SQLite` as one unit, so a transaction's statements
  never interleave with another caller's; it is started on first use under `Larder.PoolSupervisor`, and when it
  or the driver dies the next call opens the file again. The file is opened in WAL mode with a 5 s busy timeout
  (spec/STORES.md §6), so processes of other languages share it.

  Inside `run/3`'s function, `query/3` answers the rows (lists of column values; BLOBs as `{:blob, bytes}`, NULL
  as `:null`) or throws; `run/3` turns every throw, driver error or timeout into `{:error, kind, message}`.
  A caller waits at most its deadline; a statement that outlives the connection's own bound stops the connection
  (it may be out of step), and the next call reopens the file.
  """

  use GenServer

  @busy_timeout_ms 5000

  def child_spec({id, path}),
    do: %{id: id, start: {__MODULE__, :start_link, [{id, path}]}, restart: :temporary}

  def start_link({id, path}),
    do: GenServer.start_link(__MODULE__, path, name: {:via, Registry, {Larder.Pools, id}})

  @doc """
  Runs `fun.(db)` in the connection of `path` (started when missing): `{:ok, result}` or `{:error, kind,
  message}` with kind `:timeout` (busy past the deadline), `:unavailable` (cannot open) or `:server`.
  """
  def run(id, path, fun, timeout_ms) do
    with {:ok, pid} <- connection(id, path) do
      try do
        deadline = System.monotonic_time(:millisecond) + timeout_ms
        GenServer.call(pid, {:run, fun, timeout_ms, deadline}, timeout_ms)
      catch
        :exit, {:timeout, _} ->
          {:error, :timeout, "no answer within #{timeout_ms} ms (the file is busy)"}

        :exit, reason ->
          {:error, :unavailable, "the connection stopped: #{inspect(reason, limit: 5)}"}
      end
    end
  end

  defp connection(id, path) do
    case Registry.lookup(Larder.Pools, id) do
      [{pid, _}] ->
        {:ok, pid}

      [] ->
        case DynamicSupervisor.start_child(Larder.PoolSupervisor, {__MODULE__, {id, path}}) do
          {:ok, pid} -> {:ok, pid}
          {:error, {:already_started, pid}} -> {:ok, pid}
          {:error, {:cannot_open, message}} -> {:error, :unavailable, message}
          {:error, other} -> {:error, :unavailable, "cannot open: #{inspect(other, limit: 5)}"}
        end
    end
  end

  @doc "The rows of one statement (each row a list), or a throw of `{:sql, kind, message}`."
  def query(db, sql, params \\ []) do
    case :sqlite3.sql_exec_timeout(db, sql, params, Process.get(:larder_sql_timeout, 10_000)) do
      [columns: _, rows: rows] ->
        Enum.map(rows, &Tuple.to_list/1)

      :ok ->
        []

      {:rowid, _} ->
        []

      {:error, code, message} ->
        throw({:sql, kind(code), "#{message} (SQLite error #{code})"})

      other ->
        throw({:sql, :malformed, "an unexpected driver answer: #{inspect(other, limit: 5)}"})
    end
  end

  @doc "Runs `fun` between `BEGIN IMMEDIATE` and `COMMIT`, rolling back when it throws."
  def transaction(db, fun) do
    query(db, "BEGIN IMMEDIATE")

    try do
      result = fun.()
      query(db, "COMMIT")
      result
    catch
      kind, reason ->
        :sqlite3.sql_exec_timeout(db, "ROLLBACK", [], 10_000)
        :erlang.raise(kind, reason, __STACKTRACE__)
    end
  end

  # SQLITE_BUSY and SQLITE_LOCKED: another process held the file past the busy timeout.
  defp kind(code) when code in [5, 6], do: :timeout
  defp kind(_), do: :server

  @impl true
  def init(path) do
    Process.flag(:trap_exit, true)

    opened =
      try do
        :sqlite3.open(:anonymous, file: String.to_charlist(path))
      catch
        _, reason -> {:error, reason}
      end

    with {:ok, db} <- opened,
         {:ok, _} <- pragmas(db) do
      {:ok, db}
    else
      {:error, reason} ->
        {:stop, {:cannot_open, "cannot open #{path}: #{describe(reason)}"}}
    end
  end

  defp pragmas(db) do
    {:ok,
     [
       query(db, "PRAGMA busy_timeout = #{@busy_timeout_ms}"),
       query(db, "PRAGMA journal_mode = WAL")
     ]}
  catch
    {:sql, _, message} -> {:error, message}
  end

  defp describe(reason) when is_list(reason), do: List.to_string(reason)
  defp describe(reason) when is_binary(reason), do: reason
  defp describe(reason), do: inspect(reason, limit: 5)

  @impl true
  def handle_call({:run, fun, timeout_ms, deadline}, _from, db) do
    if System.monotonic_time(:millisecond) >= deadline do
      # The caller gave up while its request waited its turn: its work is not done late.
      {:reply, {:error, :timeout, "no answer within #{timeout_ms} ms (the file is busy)"}, db}
    else
      run_now(fun, timeout_ms, db)
    end
  end

  defp run_now(fun, timeout_ms, db) do
    Process.put(:larder_sql_timeout, timeout_ms)

    try do
      {:reply, {:ok, fun.(db)}, db}
    catch
      {:sql, kind, message} ->
        {:reply, {:error, kind, message}, db}

      :error, e ->
        {:reply, {:error, :malformed, Exception.message(e)}, db}

      :exit, {:timeout, _} ->
        {:stop, :normal, {:error, :timeout, "a statement passed #{timeout_ms} ms"}, db}

      :exit, reason ->
        {:stop, :normal,
         {:error, :unavailable, "the driver stopped: #{inspect(reason, limit: 5)}"}, db}
    end
  end

  @impl true
  def handle_info({:EXIT, db, reason}, db), do: {:stop, {:driver_stopped, reason}, db}
  def handle_info(_, db), do: {:noreply, db}

  @impl true
  def terminate(_reason, db) when is_pid(db) do
    :sqlite3.close_timeout(db, 1000)
  catch
    _, _ -> :ok
  end

  def terminate(_, _), do: :ok
end
