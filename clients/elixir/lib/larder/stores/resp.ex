defmodule Larder.Stores.RESP do
  @moduledoc """
  RESP2, the Redis wire protocol, written and read with bounds (spec/STORES.md §2 "Replies are hostile too"): a
  bulk string longer than `max_value` is refused when its length is announced, arrays nest at most 8 deep and
  carry at most `max_items` elements (what the command can produce), lines end within 8 KiB, and everything is
  read under the connection's total deadline (`Larder.Stores.Conn`). Debian's eredis would do the protocol, but
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
  One reply: `{:ok, reply, conn}` where a reply is a binary (simple or bulk), `nil`, an integer, a list, or
  `{:redis_error, line}`; or `{:error, kind, message}`.
  """
  def read(conn, max_value, max_items), do: read(conn, max_value, max_items, 0)

  defp read(_conn, _mv, _mi, depth) when depth > @max_depth,
    do: {:error, :malformed, "a reply nested more than #{@max_depth} deep"}

  defp read(conn, mv, mi, depth) do
    with {:ok, line, conn} <- Conn.line(conn) do
      case line do
        "+" <> text ->
          {:ok, text, conn}

        "-" <> text ->
          {:ok, {:redis_error, text}, conn}

        ":" <> n ->
          with_int(n, fn i -> {:ok, i, conn} end)

        "$-1" ->
          {:ok, nil, conn}

        "$" <> n ->
          with_int(n, fn
            len when len < 0 ->
              malformed("a negative bulk length")

            len when len > mv ->
              malformed("a value of #{len} bytes announced; max_value is #{mv}")

            len ->
              bulk_body(conn, len)
          end)

        "*-1" ->
          {:ok, nil, conn}

        "*" <> n ->
          with_int(n, fn
            count when count < 0 ->
              malformed("a negative array length")

            count when count > mi ->
              malformed("an array of #{count} elements where at most #{mi} can come")

            count ->
              elements(conn, count, [], mv, mi, depth + 1)
          end)

        _ ->
          malformed("unexpected reply #{inspect(binary_part(line, 0, min(byte_size(line), 60)))}")
      end
    end
  end

  defp bulk_body(conn, len) do
    case Conn.exactly(conn, len + 2) do
      {:ok, <<data::binary-size(len), "\r\n">>, conn} -> {:ok, data, conn}
      {:ok, _, _} -> malformed("a bulk string without its CR LF")
      e -> e
    end
  end

  defp elements(conn, 0, acc, _, _, _), do: {:ok, Enum.reverse(acc), conn}

  defp elements(conn, n, acc, mv, mi, depth) do
    with {:ok, item, conn} <- read(conn, mv, mi, depth),
         do: elements(conn, n - 1, [item | acc], mv, mi, depth)
  end

  defp with_int(text, fun) do
    case Integer.parse(text) do
      {i, ""} when abs(i) < 0x7FFF_FFFF_FFFF_FFFF -> fun.(i)
      _ -> malformed("a bad number #{inspect(binary_part(text, 0, min(byte_size(text), 30)))}")
    end
  end

  defp malformed(message), do: {:error, :malformed, message}
end
