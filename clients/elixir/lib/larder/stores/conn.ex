defmodule Larder.Stores.Conn do
  @moduledoc """
  One exchange with a remote server under a *total* deadline (spec/STORES.md §2 "Replies are hostile too"):
  connecting, sending and every read share one deadline, so a server that drips a byte at a time is cut off like
  one that says nothing. Lines are bounded (8 KiB without an end is malformed) and values are read only after
  their announced length was checked. Each reply is bounded as a whole too (`bound/2`): the caller sets the bytes
  the command's reply may take, every line and value read counts against them, and a value announced past what is
  left is refused before a byte of it is read, so a reply of many values, each within its own bound, cannot add
  up past the reply's. Errors are `{:error, kind, message}` with kind `:timeout`, `:unavailable` or `:malformed`;
  the caller turns them into a failure of the server and discards the socket.
  """

  defstruct [:socket, :deadline, buf: "", fresh: false, left: :infinity]

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

  @doc """
  Bounds what is read from here on (the next reply) to `bytes` in all, lines with their CR LF included:
  past it, `line/1` and `exactly/2` are `:malformed`.
  """
  def bound(%__MODULE__{} = c, bytes) when is_integer(bytes) and bytes >= 0,
    do: %{c | left: bytes}

  @doc "The bytes the current reply may still take (`:infinity` when unbounded)."
  def room(%__MODULE__{left: left}), do: left

  @doc "One line without its CR LF: `{:ok, line, conn}`."
  def line(%__MODULE__{buf: buf} = c) do
    case :binary.match(buf, "\r\n") do
      {i, 2} ->
        with {:ok, c} <- take(c, i + 2),
             do:
               {:ok, binary_part(buf, 0, i),
                %{c | buf: binary_part(buf, i + 2, byte_size(buf) - i - 2)}}

      :nomatch when byte_size(buf) > @max_line ->
        {:error, :malformed, "a reply line passed #{@max_line} bytes without ending"}

      :nomatch when c.left != :infinity and byte_size(buf) > c.left ->
        past(c)

      :nomatch ->
        with {:ok, c} <- more(c), do: line(c)
    end
  end

  @doc """
  Exactly `n` bytes (the caller checked `n` against its own bound): `{:ok, bytes, conn}`; `:malformed` at once,
  before anything is read, when `n` is past what the reply may still take.
  """
  def exactly(%__MODULE__{left: left} = c, n) when left != :infinity and n > left, do: past(c)

  def exactly(%__MODULE__{buf: buf} = c, n) when byte_size(buf) >= n do
    with {:ok, c} <- take(c, n),
         do: {:ok, binary_part(buf, 0, n), %{c | buf: binary_part(buf, n, byte_size(buf) - n)}}
  end

  def exactly(c, n), do: with({:ok, c} <- more(c), do: exactly(c, n))

  defp take(%__MODULE__{left: :infinity} = c, _n), do: {:ok, c}
  defp take(%__MODULE__{left: left} = c, n) when n <= left, do: {:ok, %{c | left: left - n}}
  defp take(c, _n), do: past(c)

  defp past(_c),
    do: {:error, :malformed, "the reply passed the bytes its command's reply may take"}

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
