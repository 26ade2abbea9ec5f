defmodule Larder.Stores.Pool do
  @moduledoc """
  Idle connections to one server, kept by a process so that short-lived callers (a request's process) reuse them.
  A caller checks a socket out, uses it (passive mode: any process may send and receive), and checks it back in,
  or discards it when the exchange failed (a socket out of step is never reused). The pool monitors borrowers:
  a caller that dies holding a socket has it closed. At most `size` idle sockets are kept; a busy pool never makes
  a caller wait, it connects anew.
  """

  use GenServer

  def child_spec({id, server, size}),
    do: %{
      id: {id, server},
      start: {__MODULE__, :start_link, [{id, server, size}]},
      restart: :temporary
    }

  def start_link({id, server, size}),
    do:
      GenServer.start_link(__MODULE__, size, name: {:via, Registry, {Larder.Pools, {id, server}}})

  @doc "The pool of `server` for store `id`, started on first use."
  def for(id, server, size) do
    case Registry.lookup(Larder.Pools, {id, server}) do
      [{pid, _}] ->
        pid

      [] ->
        case DynamicSupervisor.start_child(
               Larder.PoolSupervisor,
               {__MODULE__, {id, server, size}}
             ) do
          {:ok, pid} -> pid
          {:error, {:already_started, pid}} -> pid
        end
    end
  end

  @doc "`{:ok, socket}` (now lent to the caller) or `:empty` (the caller connects); waits at most `wait_ms`."
  def checkout(pool, wait_ms) do
    GenServer.call(pool, :checkout, max(wait_ms, 1))
  catch
    :exit, _ -> :empty
  end

  @doc "Returns a socket that is in step (its exchange completed)."
  def checkin(pool, socket) do
    :gen_tcp.controlling_process(socket, pool)
    GenServer.cast(pool, {:checkin, self(), socket})
  catch
    :exit, _ -> :gen_tcp.close(socket)
  end

  @doc "Closes a socket that must not be reused."
  def discard(pool, socket) do
    :gen_tcp.close(socket)
    GenServer.cast(pool, {:forget, self(), socket})
  end

  @impl true
  def init(size), do: {:ok, %{size: size, idle: [], lent: %{}}}

  @impl true
  def handle_call(:checkout, {pid, _}, %{idle: [socket | rest]} = s) do
    ref = Process.monitor(pid)
    {:reply, {:ok, socket}, %{s | idle: rest, lent: Map.put(s.lent, socket, ref)}}
  end

  def handle_call(:checkout, _from, s), do: {:reply, :empty, s}

  @impl true
  def handle_cast({:checkin, _pid, socket}, s) do
    s = forget(s, socket)

    if length(s.idle) < s.size do
      {:noreply, %{s | idle: [socket | s.idle]}}
    else
      :gen_tcp.close(socket)
      {:noreply, s}
    end
  end

  def handle_cast({:forget, _pid, socket}, s), do: {:noreply, forget(s, socket)}

  @impl true
  def handle_info({:DOWN, ref, :process, _, _}, s) do
    case Enum.find(s.lent, fn {_, r} -> r == ref end) do
      {socket, _} ->
        :gen_tcp.close(socket)
        {:noreply, %{s | lent: Map.delete(s.lent, socket)}}

      nil ->
        {:noreply, s}
    end
  end

  def handle_info(_, s), do: {:noreply, s}

  defp forget(s, socket) do
    case Map.pop(s.lent, socket) do
      {nil, _} -> s
      {ref, lent} -> Process.demonitor(ref, [:flush]) && %{s | lent: lent}
    end
  end
end
