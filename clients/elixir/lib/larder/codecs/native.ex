defmodule Larder.Codecs.Native do
  @moduledoc """
  zstd and Brotli through `priv/bin/larder_codec`, a port program over the system libraries (c_src/larder_codec.c,
  built by `mix compile` when `cc`, libzstd-dev and libbrotli-dev are there). A port, not a NIF: whatever a hostile
  entry does to a decoder, the BEAM survives it. The program checks zstd's recorded content size against
  `max_size` before allocating and stops Brotli output past it (spec/FORMAT.md §3).

  Under the application a GenServer keeps one port open; elsewhere (the conformance runner, scripts) each call
  runs the program once. Without the program, compressing with zstd or Brotli raises ArgumentError and decoding
  them is `{:unsupported_compressor, name}`: the entry may be valid, this client cannot read it, and never guesses.
  """

  use GenServer
  alias Larder.Error

  @ids %{zstd: 3, brotli: 4}
  @levels %{zstd: 3, brotli: 4}

  @doc "The program's path, or nil."
  def program do
    case :code.priv_dir(:larder) do
      {:error, _} -> System.get_env("LARDER_CODEC")
      dir -> Path.join(dir, "bin/larder_codec")
    end
    |> then(fn path -> if path && File.exists?(path), do: path, else: nil end)
  end

  @doc "Whether zstd and Brotli are available."
  def available?, do: program() != nil

  def compress(name, data, level) do
    level = clamp(name, level || @levels[name])

    case request(?c, name, level, 0, data) do
      {0, out} ->
        out

      {_, message} ->
        raise ArgumentError, "#{name} compression failed: #{message}"

      :unavailable ->
        raise ArgumentError,
              "unsupported_compressor: #{name} (priv/bin/larder_codec is not built)"
    end
  end

  defp clamp(:zstd, l), do: l |> max(-7) |> min(22)
  defp clamp(:brotli, l), do: l |> max(0) |> min(11)

  @doc false
  # Throws like every decoder of this client.
  def decompress!(name, data, max) do
    case request(?d, name, 0, max, data) do
      {0, out} -> out
      {1, message} -> Error.fail(:too_large, "#{name}: #{message} (#{max} bytes)")
      {2, message} -> Error.fail(:corrupt_payload, "#{name}: #{message}")
      {_, message} -> Error.fail(:corrupt_payload, "#{name}: #{message}")
      :unavailable -> Error.unsupported(name)
    end
  end

  defp request(op, name, level, max, data) do
    run([op, @ids[name], <<level::signed-32, max::64>>, data])
  end

  defp run(msg) do
    case Process.whereis(__MODULE__) do
      nil -> once(msg)
      pid -> call(pid, msg)
    end
  end

  # The shared port's process gone (restarting): run the program once instead.
  defp call(pid, msg) do
    GenServer.call(pid, {:run, msg}, 60_000)
  catch
    :exit, _ -> once(msg)
  end

  defp once(msg) do
    case program() do
      nil ->
        :unavailable

      path ->
        port = open(path)

        try do
          exchange(port, msg)
        after
          close(port)
        end
    end
  end

  defp open(path), do: Port.open({:spawn_executable, path}, [:binary, {:packet, 4}, :exit_status])

  defp close(port) do
    Port.close(port)
  catch
    _, _ -> :ok
  end

  defp exchange(port, msg) do
    send(port, {self(), {:command, msg}})

    receive do
      {^port, {:data, <<status, out::binary>>}} -> {status, out}
      {^port, {:exit_status, _}} -> {2, "the codec program stopped on this input"}
    after
      60_000 -> {3, "the codec program did not answer"}
    end
  end

  # ------------------------------------------------------------------------ the shared port (under the app)

  def start_link(_), do: GenServer.start_link(__MODULE__, [], name: __MODULE__)

  def child_spec(arg), do: %{id: __MODULE__, start: {__MODULE__, :start_link, [arg]}}

  @impl true
  def init(_), do: {:ok, nil}

  @impl true
  def handle_call({:run, msg}, _from, port) do
    port = port || (program() && open(program()))

    if port do
      case exchange(port, msg) do
        {2, "the codec program stopped" <> _} = r -> {:reply, r, nil}
        {3, "the codec program did not answer"} = r -> close(port) && {:reply, r, nil}
        r -> {:reply, r, port}
      end
    else
      {:reply, :unavailable, nil}
    end
  end

  @impl true
  def handle_info({_port, {:exit_status, _}}, _), do: {:noreply, nil}
  def handle_info(_, s), do: {:noreply, s}
end
