defmodule Larder.Codecs.Snappy do
  @moduledoc """
  Raw Snappy blocks (the varint length preamble and the elements; never the framed format), written here because
  no Erlang or Debian package offers Snappy and Hex is not reachable (spec/FORMAT.md §3).

  The compressor is a greedy matcher emitting literals and 2-byte-offset copies; the decompressor checks the
  preamble against `max_size` before anything else (so a claim of 4 or 8 GiB is `too_large`, not an allocation),
  every offset against what was produced, and stops at the declared length.
  """

  import Bitwise

  @max_offset 65_535

  @doc "One raw Snappy block holding `data`."
  def compress(data) when is_binary(data) do
    n = byte_size(data)
    body = if n < 8, do: [literal(data, 0, n)], else: scan(data, 0, 0, n - 4, n, %{}, [])
    IO.iodata_to_binary([varint(n) | body])
  end

  defp scan(data, pos, anchor, limit, n, table, acc) when pos < limit do
    <<_::binary-size(pos), word::32, _::binary>> = data
    candidate = Map.get(table, word)
    table = Map.put(table, word, pos)

    if candidate != nil and pos - candidate <= @max_offset do
      stop = extend(data, candidate + 4, pos + 4, n)
      acc = [copies(pos - candidate, stop - pos), literal(data, anchor, pos - anchor) | acc]
      scan(data, stop, stop, limit, n, table, acc)
    else
      scan(data, pos + 1 + ((pos - anchor) >>> 5), anchor, limit, n, table, acc)
    end
  end

  defp scan(data, _pos, anchor, _limit, n, _table, acc),
    do: Enum.reverse([literal(data, anchor, n - anchor) | acc])

  defp extend(data, a, b, stop) when b < stop do
    if :binary.at(data, a) == :binary.at(data, b), do: extend(data, a + 1, b + 1, stop), else: b
  end

  defp extend(_, _, b, _), do: b

  defp literal(_data, _start, 0), do: []

  defp literal(data, start, len) do
    m = len - 1

    head =
      cond do
        m < 60 -> <<m <<< 2>>
        m < 0x100 -> <<60 <<< 2, m>>
        m < 0x10000 -> <<61 <<< 2, m::little-16>>
        m < 0x1000000 -> <<62 <<< 2, m::little-24>>
        true -> <<63 <<< 2, m::little-32>>
      end

    [head, binary_part(data, start, len)]
  end

  # A copy of `len` bytes from `offset` back, as 2-byte-offset elements of at most 64 bytes (a remainder shorter
  # than 4 is made by shortening the previous element, since a copy carries at least 1 byte).
  defp copies(offset, len) when len > 64, do: [copy2(offset, 60) | copies(offset, len - 60)]
  defp copies(offset, len), do: [copy2(offset, len)]

  defp copy2(offset, len), do: <<(len - 1) <<< 2 ||| 2, offset::little-16>>

  defp varint(n) when n < 0x80, do: <<n>>
  defp varint(n), do: <<(n &&& 0x7F) ||| 0x80, varint(n >>> 7)::binary>>

  @doc """
  The length a raw block declares: `{:ok, length, preamble_bytes}` or `{:error, detail}`. Read as up to 10 bytes
  so that any absurd length is reported (as too large), not misread.
  """
  def preamble(data), do: preamble(data, 0, 0)

  defp preamble(<<>>, 0, _), do: {:error, "snappy payload is empty"}
  defp preamble(<<>>, _, _), do: {:error, "snappy length preamble is cut short"}
  defp preamble(_, 10, _), do: {:error, "snappy length preamble is longer than 10 bytes"}

  defp preamble(<<b, rest::binary>>, i, acc) do
    acc = acc ||| (b &&& 0x7F) <<< (7 * i)
    if b < 0x80, do: {:ok, acc, i + 1, rest}, else: preamble(rest, i + 1, acc)
  end

  @doc "Decodes the elements after the preamble into exactly `size` bytes: `{:ok, bytes}` or `{:error, detail}`."
  def decompress_body(body, size), do: run(body, <<>>, size)

  defp run(<<>>, out, size) do
    if byte_size(out) == size,
      do: {:ok, out},
      else: {:error, "snappy block decoded to #{byte_size(out)} bytes, preamble declared #{size}"}
  end

  defp run(<<tag, rest::binary>>, out, size) do
    case tag &&& 3 do
      0 ->
        with {:ok, len, rest} <- literal_len(tag >>> 2, rest),
             true <- byte_size(rest) >= len || {:error, "snappy: literal runs past the block"},
             true <-
               byte_size(out) + len <= size ||
                 {:error, "snappy: block decodes past the declared size"} do
          <<lit::binary-size(len), rest::binary>> = rest
          run(rest, <<out::binary, lit::binary>>, size)
        end

      1 ->
        case rest do
          <<low, rest::binary>> ->
            copy(rest, out, size, tag >>> 5 <<< 8 ||| low, (tag >>> 2 &&& 7) + 4)

          _ ->
            {:error, "snappy: block ends inside a copy"}
        end

      2 ->
        case rest do
          <<offset::little-16, rest::binary>> -> copy(rest, out, size, offset, (tag >>> 2) + 1)
          _ -> {:error, "snappy: block ends inside a copy"}
        end

      3 ->
        case rest do
          <<offset::little-32, rest::binary>> -> copy(rest, out, size, offset, (tag >>> 2) + 1)
          _ -> {:error, "snappy: block ends inside a copy"}
        end
    end
  end

  defp literal_len(m, rest) when m < 60, do: {:ok, m + 1, rest}

  defp literal_len(m, rest) do
    bytes = m - 59

    case rest do
      <<n::little-size(bytes)-unit(8), rest::binary>> -> {:ok, n + 1, rest}
      _ -> {:error, "snappy: block ends inside a literal length"}
    end
  end

  defp copy(rest, out, size, offset, len) do
    cond do
      offset == 0 or offset > byte_size(out) ->
        {:error, "snappy: bad copy offset #{offset}"}

      byte_size(out) + len > size ->
        {:error, "snappy: block decodes past the declared size"}

      offset >= len ->
        run(rest, <<out::binary, binary_part(out, byte_size(out) - offset, len)::binary>>, size)

      true ->
        run(rest, <<out::binary, overlap(out, offset, len)::binary>>, size)
    end
  end

  defp overlap(out, offset, len) do
    pattern = binary_part(out, byte_size(out) - offset, offset)
    binary_part(:binary.copy(pattern, div(len, offset) + 1), 0, len)
  end
end
