defmodule Larder.Msgpack do
  @moduledoc """
  MessagePack, written in the canonical form every larder language produces (spec/FORMAT.md §2) and read with
  bounds, because payloads come from shared stores that anyone may write.

  Writing: integers in their smallest form, floats as float64, binaries as str, `Larder.Bin` as bin, `Larder.Ext`
  as ext, maps in their iteration order and `Larder.Ordered` in its given order; atoms other than nil/true/false
  as str. Integers outside [-2^63, 2^64-1] and values nested more than 100 deep are refused (ArgumentError).

  Reading: any valid MessagePack. str and bin become binaries, ext becomes `Larder.Ext`, the non-finite floats
  (which the BEAM cannot hold) become `:nan`, `:infinity` and `:neg_infinity`; maps become maps (the last of
  duplicate keys wins) or, with `maps: :ordered`, `Larder.Ordered` with every pair kept. Every claimed count is
  checked against the bytes left before anything is built (each object takes at least one byte), nesting is
  bounded, and any failure is `{:error, {:bad_value, detail}}`, never an exception.
  """

  import Bitwise
  alias Larder.{Bin, Error, Ext, Ordered}

  @max_nesting 100
  @default_max_depth 1024

  def max_nesting, do: @max_nesting

  # ---------------------------------------------------------------------------------------------- encoding

  @doc "The canonical MessagePack bytes of `value`. Raises ArgumentError for values it cannot write."
  def encode!(value), do: value |> enc(0) |> IO.iodata_to_binary()

  @doc false
  # The same bytes as iodata, for a caller that puts a header in front of them in one copy (Larder.Entry).
  def encode_iodata!(value), do: enc(value, 0)

  @doc "`{:ok, bytes}` or `{:error, message}`."
  def encode(value) do
    {:ok, encode!(value)}
  rescue
    e in ArgumentError -> {:error, Exception.message(e)}
  end

  defp enc(nil, _), do: <<0xC0>>
  defp enc(false, _), do: <<0xC2>>
  defp enc(true, _), do: <<0xC3>>
  defp enc(i, _) when is_integer(i), do: int(i)
  defp enc(f, _) when is_float(f), do: <<0xCB, f::float-64>>
  defp enc(:nan, _), do: <<0xCB, 0x7FF8000000000000::64>>
  defp enc(:infinity, _), do: <<0xCB, 0x7FF0000000000000::64>>
  defp enc(:neg_infinity, _), do: <<0xCB, 0xFFF0000000000000::64>>
  defp enc(a, d) when is_atom(a), do: enc(Atom.to_string(a), d)

  # A short string (most keys and fields) as a byte and the string: no binary built for its header.
  defp enc(s, _) when is_binary(s) and byte_size(s) < 32, do: [0xA0 + byte_size(s) | s]
  defp enc(s, _) when is_binary(s), do: str(s)
  defp enc(%Bin{data: b}, _) when is_binary(b), do: bin(b)
  defp enc(%Ext{type: t, data: b}, _) when t in -128..127 and is_binary(b), do: ext(t, b)

  defp enc(%Ordered{pairs: pairs}, d) do
    depth!(d)
    [map_head(length(pairs)) | Enum.map(pairs, fn {k, v} -> [enc(k, d + 1), enc(v, d + 1)] end)]
  end

  defp enc(%_{} = s, _),
    do: raise(ArgumentError, "cannot write a #{inspect(s.__struct__)} as MessagePack")

  # Maps in :maps.fold's order, the order Enum.map walked before (the bytes are unchanged), into an iolist that
  # grows on the left, so nothing is reversed; lists by plain recursion. No Enumerable dispatch per element.
  # A small map (at most 32 keys: a "flatmap", its keys kept sorted) walks its pairs from one :maps.to_list/1, in
  # that same order.
  defp enc(m, d) when is_map(m) and map_size(m) <= 32 do
    depth!(d)
    [map_head(map_size(m)) | enc_pairs(:maps.to_list(m), d + 1)]
  end

  defp enc(m, d) when is_map(m) do
    depth!(d)
    d = d + 1
    :maps.fold(fn k, v, acc -> [acc, enc(k, d) | enc(v, d)] end, map_head(map_size(m)), m)
  end

  defp enc(l, d) when is_list(l) do
    depth!(d)
    [array_head(length(l)) | enc_items(l, d + 1)]
  end

  defp enc(t, d) when is_tuple(t), do: enc(Tuple.to_list(t), d)
  defp enc(other, _), do: raise(ArgumentError, "cannot write #{inspect(other)} as MessagePack")

  defp enc_items([v | rest], d), do: [enc(v, d) | enc_items(rest, d)]
  defp enc_items([], _), do: []

  defp enc_pairs([{k, v} | rest], d), do: [enc(k, d), enc(v, d) | enc_pairs(rest, d)]
  defp enc_pairs([], _), do: []

  defp depth!(d) when d >= @max_nesting,
    do: raise(ArgumentError, "value nested more than #{@max_nesting} levels deep")

  defp depth!(_), do: :ok

  defp int(i) when i >= 0 and i < 128, do: <<i>>
  defp int(i) when i >= -32 and i < 0, do: <<i::signed-8>>
  defp int(i) when i >= 0 and i < 0x100, do: <<0xCC, i>>
  defp int(i) when i >= 0 and i < 0x10000, do: <<0xCD, i::16>>
  defp int(i) when i >= 0 and i < 0x100000000, do: <<0xCE, i::32>>
  defp int(i) when i >= 0 and i < 0x10000000000000000, do: <<0xCF, i::64>>
  defp int(i) when i >= -0x80 and i < 0, do: <<0xD0, i::signed-8>>
  defp int(i) when i >= -0x8000 and i < 0, do: <<0xD1, i::signed-16>>
  defp int(i) when i >= -0x80000000 and i < 0, do: <<0xD2, i::signed-32>>
  defp int(i) when i >= -0x8000000000000000 and i < 0, do: <<0xD3, i::signed-64>>

  defp int(i),
    do: raise(ArgumentError, "integer #{i} is outside the MessagePack range [-2^63, 2^64-1]")

  defp str(s) do
    n = byte_size(s)

    cond do
      n < 32 -> [<<0xA0 + n>>, s]
      n < 0x100 -> [<<0xD9, n>>, s]
      n < 0x10000 -> [<<0xDA, n::16>>, s]
      n < 0x100000000 -> [<<0xDB, n::32>>, s]
      true -> raise ArgumentError, "string of #{n} bytes is too long for MessagePack"
    end
  end

  defp bin(b) do
    n = byte_size(b)

    cond do
      n < 0x100 -> [<<0xC4, n>>, b]
      n < 0x10000 -> [<<0xC5, n::16>>, b]
      n < 0x100000000 -> [<<0xC6, n::32>>, b]
      true -> raise ArgumentError, "bytes of #{n} are too long for MessagePack"
    end
  end

  defp ext(t, b) do
    case byte_size(b) do
      1 -> [<<0xD4, t::signed-8>>, b]
      2 -> [<<0xD5, t::signed-8>>, b]
      4 -> [<<0xD6, t::signed-8>>, b]
      8 -> [<<0xD7, t::signed-8>>, b]
      16 -> [<<0xD8, t::signed-8>>, b]
      n when n < 0x100 -> [<<0xC7, n, t::signed-8>>, b]
      n when n < 0x10000 -> [<<0xC8, n::16, t::signed-8>>, b]
      n -> [<<0xC9, n::32, t::signed-8>>, b]
    end
  end

  defp array_head(n) when n < 16, do: <<0x90 + n>>
  defp array_head(n) when n < 0x10000, do: <<0xDC, n::16>>
  defp array_head(n), do: <<0xDD, n::32>>

  defp map_head(n) when n < 16, do: <<0x80 + n>>
  defp map_head(n) when n < 0x10000, do: <<0xDE, n::16>>
  defp map_head(n), do: <<0xDF, n::32>>

  # ---------------------------------------------------------------------------------------------- decoding

  @doc """
  The one object `payload` holds: `{:ok, value}` or `{:error, {:bad_value, detail}}`. Trailing bytes are an error.
  Options: `maps: :map | :ordered` (default `:map`), `max_depth` (default 1024; a container inside that many
  others is refused).
  """
  def decode(payload, opts \\ []) when is_binary(payload) do
    Error.catching(fn -> {:ok, decode!(payload, opts)} end)
  end

  @doc false
  # Throws like every decoder of this client; public callers use decode/2.
  def decode!(payload, opts \\ []) do
    ordered = Keyword.get(opts, :maps, :map) == :ordered
    max_depth = Keyword.get(opts, :max_depth, @default_max_depth)

    case read(payload, 0, ordered, max_depth) do
      {value, <<>>} -> value
      {_, rest} -> bad("#{byte_size(rest)} bytes after the value")
    end
  end

  @doc false
  # One object from the front of `data`: {value, rest}. Throws bad_value.
  def read(data, depth, ordered, max_depth) do
    case data do
      <<i, rest::binary>> when i < 0x80 -> {i, rest}
      <<i, rest::binary>> when i >= 0xE0 -> {i - 0x100, rest}
      <<0xC0, rest::binary>> -> {nil, rest}
      <<0xC2, rest::binary>> -> {false, rest}
      <<0xC3, rest::binary>> -> {true, rest}
      <<0xCC, i, rest::binary>> -> {i, rest}
      <<0xCD, i::16, rest::binary>> -> {i, rest}
      <<0xCE, i::32, rest::binary>> -> {i, rest}
      <<0xCF, i::64, rest::binary>> -> {i, rest}
      <<0xD0, i::signed-8, rest::binary>> -> {i, rest}
      <<0xD1, i::signed-16, rest::binary>> -> {i, rest}
      <<0xD2, i::signed-32, rest::binary>> -> {i, rest}
      <<0xD3, i::signed-64, rest::binary>> -> {i, rest}
      <<0xCA, bits::32, rest::binary>> -> {float32(bits), rest}
      <<0xCB, bits::64, rest::binary>> -> {float64(bits), rest}
      <<m, rest::binary>> when m in 0xA0..0xBF -> take(rest, m - 0xA0)
      <<0xD9, n, rest::binary>> -> take(rest, n)
      <<0xDA, n::16, rest::binary>> -> take(rest, n)
      <<0xDB, n::32, rest::binary>> -> take(rest, n)
      <<0xC4, n, rest::binary>> -> take(rest, n)
      <<0xC5, n::16, rest::binary>> -> take(rest, n)
      <<0xC6, n::32, rest::binary>> -> take(rest, n)
      <<m, rest::binary>> when m in 0x90..0x9F -> array(rest, m - 0x90, depth, ordered, max_depth)
      <<0xDC, n::16, rest::binary>> -> array(rest, n, depth, ordered, max_depth)
      <<0xDD, n::32, rest::binary>> -> array(rest, n, depth, ordered, max_depth)
      <<m, rest::binary>> when m in 0x80..0x8F -> map(rest, m - 0x80, depth, ordered, max_depth)
      <<0xDE, n::16, rest::binary>> -> map(rest, n, depth, ordered, max_depth)
      <<0xDF, n::32, rest::binary>> -> map(rest, n, depth, ordered, max_depth)
      <<0xD4, t::signed-8, rest::binary>> -> ext(rest, t, 1)
      <<0xD5, t::signed-8, rest::binary>> -> ext(rest, t, 2)
      <<0xD6, t::signed-8, rest::binary>> -> ext(rest, t, 4)
      <<0xD7, t::signed-8, rest::binary>> -> ext(rest, t, 8)
      <<0xD8, t::signed-8, rest::binary>> -> ext(rest, t, 16)
      <<0xC7, n, t::signed-8, rest::binary>> -> ext(rest, t, n)
      <<0xC8, n::16, t::signed-8, rest::binary>> -> ext(rest, t, n)
      <<0xC9, n::32, t::signed-8, rest::binary>> -> ext(rest, t, n)
      <<0xC1, _::binary>> -> bad("reserved marker 0xc1")
      _ -> bad("payload ends early")
    end
  end

  defp take(data, n) do
    case data do
      <<s::binary-size(n), rest::binary>> -> {s, rest}
      _ -> bad("payload ends early")
    end
  end

  defp ext(data, t, n) do
    {b, rest} = take(data, n)
    {%Ext{type: t, data: b}, rest}
  end

  defp array(data, n, depth, ordered, max_depth) do
    enter(depth, max_depth)

    if n > byte_size(data),
      do: bad("array of #{n} items in #{byte_size(data)} bytes: payload ends early")

    items(data, n, [], depth + 1, ordered, max_depth)
  end

  defp items(rest, 0, acc, _, _, _), do: {Enum.reverse(acc), rest}

  defp items(data, n, acc, depth, ordered, max_depth) do
    {v, rest} = read(data, depth, ordered, max_depth)
    items(rest, n - 1, [v | acc], depth, ordered, max_depth)
  end

  defp map(data, n, depth, ordered, max_depth) do
    enter(depth, max_depth)

    if 2 * n > byte_size(data),
      do: bad("map of #{n} pairs in #{byte_size(data)} bytes: payload ends early")

    {pairs, rest} = pairs(data, n, [], depth + 1, ordered, max_depth)
    {if(ordered, do: %Ordered{pairs: pairs}, else: Map.new(pairs)), rest}
  end

  defp pairs(rest, 0, acc, _, _, _), do: {Enum.reverse(acc), rest}

  defp pairs(data, n, acc, depth, ordered, max_depth) do
    {k, rest} = read(data, depth, ordered, max_depth)
    {v, rest} = read(rest, depth, ordered, max_depth)
    pairs(rest, n - 1, [{k, v} | acc], depth, ordered, max_depth)
  end

  defp enter(depth, max_depth) when depth >= max_depth,
    do: bad("value nested more than #{max_depth} deep")

  defp enter(_, _), do: :ok

  defp float64(bits) do
    if (bits >>> 52 &&& 0x7FF) == 0x7FF do
      if (bits &&& 0xFFFFFFFFFFFFF) == 0,
        do: if(bits >>> 63 == 1, do: :neg_infinity, else: :infinity),
        else: :nan
    else
      <<f::float-64>> = <<bits::64>>
      f
    end
  end

  defp float32(bits) do
    if (bits >>> 23 &&& 0xFF) == 0xFF do
      if (bits &&& 0x7FFFFF) == 0,
        do: if(bits >>> 31 == 1, do: :neg_infinity, else: :infinity),
        else: :nan
    else
      <<f::float-32>> = <<bits::32>>
      f
    end
  end

  defp bad(detail), do: Error.fail(:bad_value, "msgpack: #{detail}")
end
