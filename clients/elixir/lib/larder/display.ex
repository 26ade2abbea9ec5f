defmodule Larder.Display do
  @moduledoc """
  Display JSON (spec/CLI.md): how a decoded value is written, the same in every language, so outputs compare.

  Compact JSON with non-ASCII written as itself; floats as Python's `repr` (`1.0`, `1e+16`, `NaN`, `Infinity`);
  byte strings as JSON strings when they are UTF-8, else `{"$base64":"…"}`; ext as `{"$ext":t,"$base64":"…"}`;
  maps (`Larder.Ordered`) keep their order and duplicate keys, and a key that is not a string is written as the
  display JSON of the key, as a string. Depth and length are bounded while writing (keys that are maps double
  their escaping at every level), so a hostile value cannot make the display explode.
  """

  alias Larder.{Ext, Ordered}

  @escapes %{
    ?" => "\\\"",
    ?\\ => "\\\\",
    ?\b => "\\b",
    ?\f => "\\f",
    ?\n => "\\n",
    ?\r => "\\r",
    ?\t => "\\t"
  }

  @doc """
  `{:ok, text}`, `{:error, :too_deep}` (a container inside `max_depth` others) or `{:error, :too_large}` (more than
  `limit` characters).
  """
  def display_json(value, opts \\ []) do
    limit = Keyword.get(opts, :limit)
    max_depth = Keyword.get(opts, :max_depth)
    byte_limit = if limit, do: 4 * limit, else: nil
    {io, _} = write(value, 0, {byte_limit, max_depth})
    text = IO.iodata_to_binary(io)

    if limit && code_points(text) > limit, do: {:error, :too_large}, else: {:ok, text}
  catch
    {__MODULE__, reason} -> {:error, reason}
  end

  defp write(%Ordered{pairs: pairs}, depth, lim), do: write_map(pairs, depth, lim)
  defp write(%Ext{} = e, _, lim), do: sized(scalar(e), lim)
  defp write(%_{} = s, _, _), do: raise(ArgumentError, "cannot display #{inspect(s)}")
  defp write(m, depth, lim) when is_map(m), do: write_map(Enum.to_list(m), depth, lim)

  defp write(l, depth, lim) when is_list(l) do
    enter(depth, lim)

    {parts, n} =
      Enum.reduce(l, {[], 2}, fn item, {acc, n} ->
        {io, k} = write(item, depth + 1, lim)
        n = check(n + k + 1, lim)
        {[io | acc], n}
      end)

    {["[", parts |> Enum.reverse() |> Enum.intersperse(","), "]"], n}
  end

  defp write(v, _, lim), do: sized(scalar(v), lim)

  defp write_map(pairs, depth, lim) do
    enter(depth, lim)

    {parts, n} =
      Enum.reduce(pairs, {[], 2}, fn {k, v}, {acc, n} ->
        {kio, kn} = key_json(k, depth, lim)
        n = check(n + kn + 2, lim)
        {vio, vn} = write(v, depth + 1, lim)
        n = check(n + vn, lim)
        {[[kio, ":", vio] | acc], n}
      end)

    {["{", parts |> Enum.reverse() |> Enum.intersperse(","), "}"], n}
  end

  defp key_json(k, depth, lim) do
    if is_binary(k) and String.valid?(k) do
      sized(json_string(k), lim)
    else
      {io, _} = write(k, depth + 1, lim)
      sized(json_string(IO.iodata_to_binary(io)), lim)
    end
  end

  defp sized(text, lim), do: {text, check(byte_size(text), lim)}

  defp check(n, {limit, _}) when is_integer(limit) and n > limit,
    do: throw({__MODULE__, :too_large})

  defp check(n, _), do: n

  defp enter(depth, {_, max}) when is_integer(max) and depth >= max,
    do: throw({__MODULE__, :too_deep})

  defp enter(_, _), do: :ok

  @doc "Whether `value` holds an array or map inside `max` others (map keys count as inside their map)."
  def nests_deeper?(value, max), do: depth(value) > max

  defp depth(%Ordered{pairs: pairs}),
    do: 1 + Enum.reduce(pairs, 0, fn {k, v}, m -> max(m, max(depth(k), depth(v))) end)

  defp depth(%_{}), do: 0
  defp depth(m) when is_map(m), do: depth(%Ordered{pairs: Enum.to_list(m)})
  defp depth(l) when is_list(l), do: 1 + Enum.reduce(l, 0, &max(depth(&1), &2))
  defp depth(_), do: 0

  @doc "The display JSON of a value that is not a container."
  def scalar(nil), do: "null"
  def scalar(true), do: "true"
  def scalar(false), do: "false"
  def scalar(:nan), do: "NaN"
  def scalar(:infinity), do: "Infinity"
  def scalar(:neg_infinity), do: "-Infinity"
  def scalar(i) when is_integer(i), do: Integer.to_string(i)
  def scalar(f) when is_float(f), do: float_text(f)
  def scalar(b) when is_binary(b), do: bytes_json(b)
  def scalar(a) when is_atom(a), do: json_string(Atom.to_string(a))

  def scalar(%Ext{type: t, data: d}),
    do: "{\"$ext\":#{t},\"$base64\":\"#{Base.encode64(d)}\"}"

  @doc "A byte string's display JSON: a JSON string when it is UTF-8, else `{\"$base64\":\"…\"}`."
  def bytes_json(b), do: if(String.valid?(b), do: json_string(b), else: base64_json(b))

  @doc "A byte string in a human-form line: its text, unquoted, when UTF-8, else `{\"$base64\":\"…\"}`."
  def bytes_text(b), do: if(String.valid?(b), do: b, else: base64_json(b))

  defp base64_json(b), do: "{\"$base64\":\"#{Base.encode64(b)}\"}"

  @doc "`text` as a JSON string: `\"` and `\\` escaped, short forms for \\b \\f \\n \\r \\t, other controls \\u00xx."
  def json_string(text) do
    if plain?(text) do
      [?", text, ?"] |> IO.iodata_to_binary()
    else
      escaped = for <<c <- text>>, into: "", do: escape(c)
      <<?", escaped::binary, ?">>
    end
  end

  defp plain?(<<c, _::binary>>) when c < 0x20 or c == ?" or c == ?\\, do: false
  defp plain?(<<_, rest::binary>>), do: plain?(rest)
  defp plain?(<<>>), do: true

  defp escape(c) when c < 0x20 or c in [?", ?\\] do
    Map.get_lazy(@escapes, c, fn ->
      "\\u00" <> String.downcase(Base.encode16(<<c>>))
    end)
  end

  defp escape(c), do: <<c>>

  @doc """
  The shortest text that reads back as the same float64, as Python's `repr` writes it: positional from 1e-4 to
  below 1e16, otherwise scientific with a sign and at least two exponent digits.
  """
  def float_text(f) when is_float(f) do
    sign =
      if f < 0.0 or (f == 0.0 and <<f::float>> == <<0x8000000000000000::64>>), do: "-", else: ""

    if f == 0.0 do
      sign <> "0.0"
    else
      {digits, exponent} = shortest_digits(abs(f))
      sign <> repr(digits, exponent)
    end
  end

  defp shortest_digits(f) do
    [mantissa | rest] = String.split(:erlang.float_to_binary(f, [:short]), "e")
    exp = if rest == [], do: 0, else: String.to_integer(hd(rest))
    [whole, fraction] = String.split(mantissa, ".")
    all = whole <> fraction
    leading = byte_size(all) - byte_size(String.trim_leading(all, "0"))
    digits = all |> String.trim_leading("0") |> String.trim_trailing("0")
    {digits, byte_size(whole) - 1 - leading + exp}
  end

  defp repr(digits, e) when e >= -4 and e < 16 do
    if e < 0 do
      "0." <> String.duplicate("0", -e - 1) <> digits
    else
      whole = digits |> String.slice(0, e + 1) |> String.pad_trailing(e + 1, "0")

      fraction =
        if byte_size(digits) > e + 1,
          do: binary_part(digits, e + 1, byte_size(digits) - e - 1),
          else: ""

      whole <> "." <> if(fraction == "", do: "0", else: fraction)
    end
  end

  defp repr(digits, e) do
    <<first, rest::binary>> = digits
    mantissa = if rest == "", do: <<first>>, else: <<first, ?., rest::binary>>
    exp = e |> abs() |> Integer.to_string() |> String.pad_leading(2, "0")
    mantissa <> "e" <> if(e < 0, do: "-", else: "+") <> exp
  end

  @doc "The number of Unicode code points in a UTF-8 string (not graphemes, which String.length counts)."
  def code_points(text), do: byte_size(text) - count_continuations(text, 0)

  defp count_continuations(<<c, rest::binary>>, n) when c >= 0x80 and c < 0xC0,
    do: count_continuations(rest, n + 1)

  defp count_continuations(<<_, rest::binary>>, n), do: count_continuations(rest, n)
  defp count_continuations(<<>>, n), do: n

  @doc "`text` cut to its first `limit` characters, then `… (N more characters)`."
  def cut_text(text, limit) do
    more = code_points(text) - limit

    if more <= 0 do
      text
    else
      cut = text |> String.codepoints() |> Enum.take(limit) |> Enum.join()
      "#{cut}… (#{more} more #{if more == 1, do: "character", else: "characters"})"
    end
  end
end
