defmodule Larder.Stores.RESP do
  @moduledoc """
  RESP2, the Redis wire protocol, written and read with bounds (spec/STORES.md §2 "Replies are hostile too"): a
  bulk string longer than `max_value` is refused when its length is announced, arrays nest at most 8 deep, a whole
  reply holds at most the values and bytes its command can produce (`bound/3`: an array or value announced past
  what is left is refused before it is read), lines end within 8 KiB, and everything is read under the
  connection's total deadline (`Larder.Stores.Conn`). Debian's eredis would do the protocol, but
  it reads whatever a server announces and has no total deadline, so larder keeps its own here.
  """

  alias Larder.Stores.Conn

  @max_depth 8

  @doc "A command as RESP: an array of bulk strings."
  def command(args) do
    ["*", Integer.to_string(length(args)), "\r\n" | Enum.map(args, &bulk/1)]
  end

  defp bulk(a) when is_integer(a), do: bulk(Integer.to_string(a))
  defp bulk(a), do: ["$", Integer.to_string(IO.iodata_length(a)), "\r\n", a, "\r\n"]

  @doc """
  A bound on one whole reply: `value` the longest bulk string, `bytes` all its bytes (lines and values), `elements`
  the values it may hold, itself and every array's members at every depth.
  """
  def bound(value, bytes, elements), do: %{value: value, bytes: bytes, elements: elements}

  @doc """
  One reply within `bound` (`bound/3`): `{:ok, reply, conn}` where a reply is a binary (simple or bulk), `nil`, an
  integer, a list, or `{:redis_error, line}`; or `{:error, kind, message}`. An array or bulk string announced past
  what the bound has left is refused before any of it is read.
  """
  def read(conn, %{value: mv, bytes: bytes, elements: elements}) do
    with {:ok, reply, conn, _left} <- value(Conn.bound(conn, bytes), mv, elements - 1, 0),
         do: {:ok, reply, conn}
  end

  defp value(_conn, _mv, _left, depth) when depth > @max_depth,
    do: {:error, :malformed, "a reply nested more than #{@max_depth} deep"}

  defp value(conn, mv, left, depth) do
    with {:ok, line, conn} <- Conn.line(conn) do
      case line do
        "+" <> text ->
          {:ok, text, conn, left}

        "-" <> text ->
          {:ok, {:redis_error, text}, conn, left}

        ":" <> n ->
          with_int(n, fn i -> {:ok, i, conn, left} end)

        "$-1" ->
          {:ok, nil, conn, left}

        "$" <> n ->
          with_int(n, fn
            len when len < 0 ->
              malformed("a negative bulk length")

            len when len > mv ->
              malformed("a value of #{len} bytes announced where at most #{mv} can come")

            len ->
              if Conn.room(conn) != :infinity and len + 2 > Conn.room(conn),
                do: malformed("a value of #{len} bytes announced past what this reply may take"),
                else: bulk_body(conn, len, left)
          end)

        "*-1" ->
          {:ok, nil, conn, left}

        "*" <> n ->
          with_int(n, fn
            count when count < 0 ->
              malformed("a negative array length")

            count when count > left ->
              malformed("an array of #{count} elements where at most #{left} more can come")

            count ->
              elements(conn, count, [], mv, left - count, depth + 1)
          end)

        _ ->
          malformed("unexpected reply #{inspect(binary_part(line, 0, min(byte_size(line), 60)))}")
      end
    end
  end

  defp bulk_body(conn, len, left) do
    case Conn.exactly(conn, len + 2) do
      {:ok, <<data::binary-size(len), "\r\n">>, conn} -> {:ok, data, conn, left}
      {:ok, _, _} -> malformed("a bulk string without its CR LF")
      e -> e
    end
  end

  defp elements(conn, 0, acc, _, left, _), do: {:ok, Enum.reverse(acc), conn, left}

  defp elements(conn, n, acc, mv, left, depth) do
    with {:ok, item, conn, left} <- value(conn, mv, left, depth),
         do: elements(conn, n - 1, [item | acc], mv, left, depth)
  end

  defp with_int(text, fun) do
    case Integer.parse(text) do
      {i, ""} when abs(i) < 0x7FFF_FFFF_FFFF_FFFF -> fun.(i)
      _ -> malformed("a bad number #{inspect(binary_part(text, 0, min(byte_size(text), 30)))}")
    end
  end

  defp malformed(message), do: {:error, :malformed, message}
end
