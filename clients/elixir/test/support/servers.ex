defmodule Larder.TestServers do
  @moduledoc """
  Real servers for the store tests, as clients/python/tests/servers.py starts them: memcached and redis-server on
  free loopback ports, each under a small shell that kills it when the BEAM closes the port (so a crashed test
  run leaves no server behind). A missing binary is a failure that says what to install, never a skip.
  """

  @doc "A free loopback port."
  def free_port do
    {:ok, s} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(s)
    :gen_tcp.close(s)
    port
  end

  defp binary(name) do
    System.find_executable(name) ||
      raise "#{name} is not installed: run clients/elixir/test.sh (it installs memcached and redis-server) or apt-get install #{name}"
  end

  @doc "Starts memcached: `{port_handle, tcp_port}`."
  def memcached(opts \\ []) do
    port = Keyword.get(opts, :port) || free_port()

    args =
      ["-l", "127.0.0.1", "-p", "#{port}", "-U", "0", "-m", "64", "-t", "2", "-u", "root"] ++
        Keyword.get(opts, :args, [])

    {spawn_server(binary("memcached"), args, port), port}
  end

  @doc "Starts redis-server without persistence: `{port_handle, tcp_port}`."
  def redis(opts \\ []) do
    port = Keyword.get(opts, :port) || free_port()
    dir = Path.join(System.tmp_dir!(), "larder-ex-redis-#{port}")
    File.mkdir_p!(dir)

    args = [
      "--port",
      "#{port}",
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
      "--protected-mode",
      "no"
    ]

    {spawn_server(binary("redis-server"), args, port), port}
  end

  @doc """
  Starts larder-hostile (crates/testkit) as `protocol` (memcached or redis) misbehaving as `mode`: `{handle, port}`.
  It prints its address, then serves until its standard input closes (when the handle is closed).
  """
  def hostile(bin, protocol, mode, args \\ []) do
    handle =
      Port.open({:spawn_executable, bin}, [
        :binary,
        :stderr_to_stdout,
        {:line, 200},
        args: [protocol, mode | args]
      ])

    receive do
      {^handle, {:data, {:eol, "127.0.0.1:" <> port}}} -> {handle, String.to_integer(port)}
    after
      10_000 -> raise "larder-hostile did not print its address"
    end
  end

  @doc "Starts `larder serve` (the Rust front at `bin`) with `args`, waiting for `port`: a handle for `stop/2`."
  def larder_serve(bin, args, port), do: spawn_server(bin, ["serve" | args], port)

  defp spawn_server(exe, args, port) do
    script = "\"$0\" \"$@\" >/dev/null 2>&1 & pid=$!; cat >/dev/null; kill $pid; wait $pid"

    handle =
      Port.open({:spawn_executable, "/bin/sh"}, [:binary, args: ["-c", script, exe | args]])

    wait_for(port, 200)
    handle
  end

  @doc "Stops a server started here (closing its shell's stdin kills it)."
  def stop(handle, port \\ nil) do
    try do
      Port.close(handle)
    catch
      _, _ -> :ok
    end

    if port, do: wait_closed(port, 200)
    :ok
  end

  defp wait_closed(_port, 0), do: :ok

  defp wait_closed(port, n) do
    case :gen_tcp.connect({127, 0, 0, 1}, port, [], 100) do
      {:ok, s} ->
        :gen_tcp.close(s)
        Process.sleep(10)
        wait_closed(port, n - 1)

      _ ->
        :ok
    end
  end

  defp wait_for(_port, 0), do: raise("a server did not listen in time")

  defp wait_for(port, n) do
    case :gen_tcp.connect({127, 0, 0, 1}, port, [], 100) do
      {:ok, s} ->
        :gen_tcp.close(s)

      _ ->
        Process.sleep(25)
        wait_for(port, n - 1)
    end
  end
end
