defmodule Larder.Stores.Conn do
  @moduledoc """
  One exchange with a remote server under a *total* deadline (spec/STORES.md §2 "Replies are hostile too"):
  connecting, sending and every read share one deadline, so a server that drips a byte at a time is cut off like
  one that says nothing. Lines are bounded (8 KiB without an end is malformed) and values are read only after
  their announced length was checked. Errors are `{:error, kind, message}` with kind `:timeout`, `:unavailable`
  or `:malformed`; the caller turns them into a failure of the server and discards the socket.
  """

  defstruct [:socket, :deadline, buf: "", fresh: false]

  @max_line 8192

  @doc "A connection from the pool or a new one; `connect_timeout` bounds the connect, the deadline everything."
  def open(pool, host, port, deadline, connect_timeout) do
    case Larder.Stores.Pool.checkout(pool, remaining(deadline)) do
      {:ok, socket} ->
        {:ok, %__MODULE__{socket: socket, deadline: deadline}}

      :empty ->
        wait = min(connect_timeout, remaining(deadline))

        host =
          host |> String.trim_leading("[") |> String.trim_trailing("]") |> String.to_charlist()

        case :gen_tcp.connect(
               host,
               port,
               [:binary, active: false, nodelay: true, packet: :raw],
               max(wait, 1)
             ) do
          {:ok, socket} -> {:ok, %__MODULE__{socket: socket, deadline: deadline, fresh: true}}
          {:error, :timeout} -> {:error, :timeout, "connect timed out"}
          {:error, why} -> {:error, :unavailable, "cannot connect: #{:inet.format_error(why)}"}
        end
    end
  end

  @doc "Milliseconds left before `deadline` (monotonic ms)."
  def remaining(deadline), do: max(deadline - System.monotonic_time(:millisecond), 0)

  def send_all(%__MODULE__{socket: s} = c, data) do
    case :gen_tcp.send(s, data) do
      :ok -> {:ok, c}
      {:error, why} -> {:error, :unavailable, "send failed: #{inspect(why)}"}
    end
  end

  @doc "One line without its CR LF: `{:ok, line, conn}`."
  def line(%__MODULE__{buf: buf} = c) do
    case :binary.match(buf, "\r\n") do
      {i, 2} ->
        {:ok, binary_part(buf, 0, i), %{c | buf: binary_part(buf, i + 2, byte_size(buf) - i - 2)}}

      :nomatch when byte_size(buf) > @max_line ->
        {:error, :malformed, "a reply line passed #{@max_line} bytes without ending"}

      :nomatch ->
        with {:ok, c} <- more(c), do: line(c)
    end
  end

  @doc "Exactly `n` bytes (the caller checked `n` against its bound): `{:ok, bytes, conn}`."
  def exactly(%__MODULE__{buf: buf} = c, n) when byte_size(buf) >= n do
    {:ok, binary_part(buf, 0, n), %{c | buf: binary_part(buf, n, byte_size(buf) - n)}}
  end

  def exactly(c, n), do: with({:ok, c} <- more(c), do: exactly(c, n))

  defp more(%__MODULE__{socket: s, buf: buf, deadline: d} = c) do
    case remaining(d) do
      0 ->
        {:error, :timeout, "no complete answer within the timeout"}

      ms ->
        case :gen_tcp.recv(s, 0, ms) do
          {:ok, data} -> {:ok, %{c | buf: buf <> data}}
          {:error, :timeout} -> {:error, :timeout, "no complete answer within the timeout"}
          {:error, :closed} -> {:error, :unavailable, "the server closed the connection"}
          {:error, why} -> {:error, :unavailable, "receive failed: #{inspect(why)}"}
        end
    end
  end

  @doc "Whether the exchange ended in step (nothing left over): only then may the socket be reused."
  def clean?(%__MODULE__{buf: buf}), do: buf == ""
end
