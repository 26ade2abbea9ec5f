defmodule Larder.Codecs.LZ4 do
  @moduledoc """
  LZ4 *block* format (not the frame format), written here because no Erlang or Debian package offers it and
  Hex is not reachable. larder stores it behind a 4-byte little-endian uncompressed length (spec/FORMAT.md §3);
  that prefix is handled by `Larder.Compressors`, which checks it before anything is decoded.

  The compressor is a greedy single-pass matcher (4-byte hashes, 64 KiB window) that keeps the format's end rules
  (the last 5 bytes are literals, no match starts in the last 12); the decompressor checks every length and offset
  against the input and the declared output size, and never produces more than it was told.
  """

  import Bitwise

  @min_match 4
  @last_literals 5
  @mf_limit 12
  @max_offset 65_535
  @table_min 256
  @table_max 16_384

  @doc "One LZ4 block holding `data`."
  def compress(data) when is_binary(data) do
    n = byte_size(data)

    if n < @mf_limit + 1 do
      IO.iodata_to_binary(sequence(data, 0, n, nil, 0))
    else
      # The table: hash of a 4-byte word -> 1 + the last position holding a word of that hash (0: none), in an
      # :atomics array (a BIF per read or write; a map grown to thousands of keys cost 10x more per position). A
      # candidate's word is compared before it is used, so a collision only loses a match, as in LZ4's own.
      size = min(@table_max, max(@table_min, n))
      table = {:atomics.new(size, signed: false), size}
      data |> scan(0, 0, n - @mf_limit, n, table, []) |> Enum.reverse() |> IO.iodata_to_binary()
    end
  end

  defp scan(data, pos, anchor, limit, n, table, acc) when pos < limit do
    <<_::binary-size(pos), word::32, _::binary>> = data
    {ref, size} = table
    candidate = :atomics.exchange(ref, :erlang.phash2(word, size) + 1, pos + 1) - 1

    if candidate >= 0 and pos - candidate <= @max_offset and word_at(data, candidate) == word do
      len = extend(data, candidate + @min_match, pos + @min_match, n - @last_literals) - pos
      acc = [sequence(data, anchor, pos - anchor, pos - candidate, len) | acc]
      next = pos + len
      scan(data, next, next, limit, n, table, acc)
    else
      step = 1 + ((pos - anchor) >>> 6)
      scan(data, pos + step, anchor, limit, n, table, acc)
    end
  end

  defp scan(data, _pos, anchor, _limit, n, _table, acc),
    do: [sequence(data, anchor, n - anchor, nil, 0) | acc]

  defp word_at(data, pos) do
    <<_::binary-size(pos), word::32, _::binary>> = data
    word
  end

  # How far the match goes: the first position (from `b`) where the bytes differ, at most `stop`. One BIF compares
  # the two runs (a < b: they may overlap, as LZ4 matches do) instead of two :binary.at calls per byte.
  defp extend(data, a, b, stop) when b < stop do
    len = stop - b
    b + :binary.longest_common_prefix([binary_part(data, a, len), binary_part(data, b, len)])
  end

  defp extend(_, _, b, _), do: b

  defp sequence(data, lit_start, lit_len, offset, match_len) do
    lit_token = min(lit_len, 15)
    literals = binary_part(data, lit_start, lit_len)

    if offset == nil do
      [<<lit_token <<< 4>>, length_bytes(lit_len - 15), literals]
    else
      ml = match_len - @min_match

      [
        <<lit_token <<< 4 ||| min(ml, 15)>>,
        length_bytes(lit_len - 15),
        literals,
        <<offset::little-16>>,
        length_bytes(ml - 15)
      ]
    end
  end

  defp length_bytes(n) when n < 0, do: []
  defp length_bytes(n), do: [:binary.copy(<<255>>, div(n, 255)), <<rem(n, 255)>>]

  @doc """
  Decodes one block into exactly `size` bytes: `{:ok, bytes}` or `{:error, detail}` (the block does not decode,
  or gives another length).
  """
  def decompress(block, size) when is_binary(block) and is_integer(size) and size >= 0 do
    case run(block, <<>>, size) do
      {:ok, out} when byte_size(out) == size ->
        {:ok, out}

      {:ok, out} ->
        {:error, "lz4 block decoded to #{byte_size(out)} bytes, prefix declared #{size}"}

      {:error, _} = e ->
        e
    end
  end

  defp run(<<token, rest::binary>>, out, size) do
    with {:ok, lit_len, rest} <- ext_len(token >>> 4, rest),
         true <- byte_size(rest) >= lit_len || {:error, "lz4: literals run past the block"},
         true <-
           byte_size(out) + lit_len <= size ||
             {:error, "lz4: block decodes past the declared size"} do
      <<literals::binary-size(lit_len), rest::binary>> = rest
      out = <<out::binary, literals::binary>>

      case rest do
        <<>> ->
          {:ok, out}

        <<offset::little-16, rest::binary>> ->
          with true <-
                 (offset > 0 and offset <= byte_size(out)) ||
                   {:error, "lz4: bad match offset #{offset}"},
               {:ok, ml, rest} <- ext_len(token &&& 15, rest),
               ml = ml + @min_match,
               true <-
                 byte_size(out) + ml <= size ||
                   {:error, "lz4: block decodes past the declared size"} do
            run(rest, copy(out, offset, ml), size)
          end

        _ ->
          {:error, "lz4: block ends inside a match offset"}
      end
    end
  end

  defp run(<<>>, _out, _size), do: {:error, "lz4: empty or truncated block"}

  defp ext_len(15, rest), do: more_len(rest, 15)
  defp ext_len(n, rest), do: {:ok, n, rest}

  defp more_len(<<255, rest::binary>>, acc), do: more_len(rest, acc + 255)
  defp more_len(<<b, rest::binary>>, acc), do: {:ok, acc + b, rest}
  defp more_len(<<>>, _), do: {:error, "lz4: block ends inside a length"}

  defp copy(out, offset, len) when offset >= len do
    <<out::binary, binary_part(out, byte_size(out) - offset, len)::binary>>
  end

  defp copy(out, offset, len) do
    pattern = binary_part(out, byte_size(out) - offset, offset)
    repeated = :binary.copy(pattern, div(len, offset) + 1)
    <<out::binary, binary_part(repeated, 0, len)::binary>>
  end
end
