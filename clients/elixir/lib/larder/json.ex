defmodule Larder.JSON do
  @moduledoc """
  A small strict JSON (RFC 8259) reader and a compact writer. OTP 25 has no `:json` module and Hex is not
  reachable; Debian's jiffy would do, but it loses object order and duplicate keys, which larder's byte identity
  and display need (spec/FORMAT.md §2, spec/CLI.md).

  Reading: objects as maps, or with `objects: :ordered` as `Larder.Ordered` with every member kept in order (use
  `dedup/1` for "the last value at the position of the first", what a map built from the document holds). Numbers
  without fraction or exponent are integers; others floats (overflow reads as `:infinity`/`:neg_infinity`).
  Nesting is bounded (1024 by default). Errors are `{:error, message}`.

  Writing: compact, non-ASCII as itself, floats as the shortest text that reads back (Python's repr); the
  non-finite floats cannot be written.
  """

  alias Larder.{Display, Ordered}

  @max_depth 1024

  @doc "Parses one JSON text: `{:ok, value}` or `{:error, message}`."
  def decode(text, opts \\ []) when is_binary(text) do
    ordered = Keyword.get(opts, :objects, :map) == :ordered
    max_depth = Keyword.get(opts, :max_depth, @max_depth)

    unless String.valid?(text), do: throw({:json, "not UTF-8"})

    case value(skip_ws(text), 0, ordered, max_depth) do
      {v, rest} ->
        case skip_ws(rest) do
          "" -> {:ok, v}
          other -> throw({:json, "unexpected data after the value: #{snippet(other)}"})
        end
    end
  catch
    {:json, message} -> {:error, message}
  end

  @doc "Like decode/2 but raises ArgumentError."
  def decode!(text, opts \\ []) do
    case decode(text, opts) do
      {:ok, v} -> v
      {:error, m} -> raise ArgumentError, "invalid JSON: #{m}"
    end
  end

  @doc "An `Ordered` (recursively) with duplicate keys merged: the last value, at the first key's position."
  def dedup(%Ordered{pairs: pairs}) do
    {order, values} =
      Enum.reduce(pairs, {[], %{}}, fn {k, v}, {order, values} ->
        if Map.has_key?(values, k),
          do: {order, Map.put(values, k, v)},
          else: {[k | order], Map.put(values, k, v)}
      end)

    %Ordered{pairs: order |> Enum.reverse() |> Enum.map(&{&1, dedup(Map.fetch!(values, &1))})}
  end

  def dedup(list) when is_list(list), do: Enum.map(list, &dedup/1)
  def dedup(other), do: other

  defp skip_ws(<<c, rest::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: skip_ws(rest)
  defp skip_ws(rest), do: rest

  defp value(_, depth, _, max) when depth > max,
    do: throw({:json, "nested more than #{max} deep"})

  defp value("null" <> rest, _, _, _), do: {nil, rest}
  defp value("true" <> rest, _, _, _), do: {true, rest}
  defp value("false" <> rest, _, _, _), do: {false, rest}
  defp value(<<?", rest::binary>>, _, _, _), do: string(rest, [])
  defp value(<<?[, rest::binary>>, d, o, m), do: array(skip_ws(rest), [], d, o, m)
  defp value(<<?{, rest::binary>>, d, o, m), do: object(skip_ws(rest), [], d, o, m)
  defp value(<<c, _::binary>> = text, _, _, _) when c == ?- or c in ?0..?9, do: number(text)
  defp value("", _, _, _), do: throw({:json, "unexpected end of input"})
  defp value(other, _, _, _), do: throw({:json, "unexpected #{snippet(other)}"})

  defp array(<<?], rest::binary>>, [], _, _, _), do: {[], rest}

  defp array(text, acc, d, o, m) do
    if d + 1 > m, do: throw({:json, "nested more than #{m} deep"})
    {v, rest} = value(text, d + 1, o, m)

    case skip_ws(rest) do
      <<?,, rest::binary>> -> array(skip_ws(rest), [v | acc], d, o, m)
      <<?], rest::binary>> -> {Enum.reverse([v | acc]), rest}
      other -> throw({:json, "expected , or ] in an array, got #{snippet(other)}"})
    end
  end

  defp object(<<?}, rest::binary>>, [], _, o, _), do: {finish_object([], o), rest}

  defp object(<<?", text::binary>>, acc, d, o, m) do
    if d + 1 > m, do: throw({:json, "nested more than #{m} deep"})
    {k, rest} = string(text, [])

    rest =
      case skip_ws(rest) do
        <<?:, rest::binary>> -> skip_ws(rest)
        other -> throw({:json, "expected : after an object key, got #{snippet(other)}"})
      end

    {v, rest} = value(rest, d + 1, o, m)

    case skip_ws(rest) do
      <<?,, rest::binary>> -> object(skip_ws(rest), [{k, v} | acc], d, o, m)
      <<?}, rest::binary>> -> {finish_object(Enum.reverse([{k, v} | acc]), o), rest}
      other -> throw({:json, "expected , or } in an object, got #{snippet(other)}"})
    end
  end

  defp object(other, _, _, _, _),
    do: throw({:json, "expected an object key, got #{snippet(other)}"})

  defp finish_object(pairs, true), do: %Ordered{pairs: pairs}
  defp finish_object(pairs, false), do: Map.new(pairs)

  defp string(<<?", rest::binary>>, acc), do: {IO.iodata_to_binary(Enum.reverse(acc)), rest}

  defp string(<<?\\, c, rest::binary>>, acc) when c in [?", ?\\, ?/],
    do: string(rest, [<<c>> | acc])

  defp string(<<?\\, ?b, rest::binary>>, acc), do: string(rest, ["\b" | acc])
  defp string(<<?\\, ?f, rest::binary>>, acc), do: string(rest, ["\f" | acc])
  defp string(<<?\\, ?n, rest::binary>>, acc), do: string(rest, ["\n" | acc])
  defp string(<<?\\, ?r, rest::binary>>, acc), do: string(rest, ["\r" | acc])
  defp string(<<?\\, ?t, rest::binary>>, acc), do: string(rest, ["\t" | acc])

  defp string(<<?\\, ?u, a::binary-size(4), rest::binary>>, acc) do
    case {hex4(a), rest} do
      {hi, <<?\\, ?u, b::binary-size(4), rest2::binary>>} when hi in 0xD800..0xDBFF ->
        case hex4(b) do
          lo when lo in 0xDC00..0xDFFF ->
            string(rest2, [<<0x10000 + (hi - 0xD800) * 0x400 + (lo - 0xDC00)::utf8>> | acc])

          _ ->
            throw({:json, "a lone surrogate \\u#{a}"})
        end

      {c, _} when c in 0xD800..0xDFFF ->
        throw({:json, "a lone surrogate \\u#{a}"})

      {c, _} ->
        string(rest, [<<c::utf8>> | acc])
    end
  end

  defp string(<<?\\, _::binary>> = text, _), do: throw({:json, "bad escape #{snippet(text)}"})

  defp string(<<c, _::binary>>, _) when c < 0x20,
    do: throw({:json, "a control character in a string"})

  defp string(text, acc) do
    case :binary.match(text, [<<?">>, <<?\\>>]) do
      :nomatch ->
        throw({:json, "unterminated string"})

      {pos, _} ->
        chunk = binary_part(text, 0, pos)

        if control?(chunk), do: throw({:json, "a control character in a string"})

        string(binary_part(text, pos, byte_size(text) - pos), [chunk | acc])
    end
  end

  defp control?(<<c, _::binary>>) when c < 0x20, do: true
  defp control?(<<_, rest::binary>>), do: control?(rest)
  defp control?(<<>>), do: false

  defp hex4(h) do
    case Integer.parse(h, 16) do
      {n, ""} when byte_size(h) == 4 -> n
      _ -> throw({:json, "bad \\u escape: #{h}"})
    end
  end

  defp number(text) do
    {int_part, rest} = take_int(text)
    {frac, rest} = take_frac(rest)
    {exp, rest} = take_exp(rest)
    literal = int_part <> frac <> exp

    if frac == "" and exp == "" do
      {String.to_integer(literal), rest}
    else
      {to_float(int_part, frac, exp), rest}
    end
  end

  defp take_int(<<?-, rest::binary>>) do
    {digits, rest} = take_int(rest)
    {"-" <> digits, rest}
  end

  defp take_int(<<?0, c, _::binary>>) when c in ?0..?9,
    do: throw({:json, "a number with a leading zero"})

  defp take_int(<<?0, rest::binary>>), do: {"0", rest}

  defp take_int(<<c, _::binary>> = text) when c in ?1..?9, do: digits(text, "")
  defp take_int(other), do: throw({:json, "bad number at #{snippet(other)}"})

  defp digits(<<c, rest::binary>>, acc) when c in ?0..?9, do: digits(rest, <<acc::binary, c>>)
  defp digits(rest, acc), do: {acc, rest}

  defp take_frac(<<?., c, _::binary>> = text) when c in ?0..?9 do
    <<?., rest::binary>> = text
    {d, rest} = digits(rest, "")
    {"." <> d, rest}
  end

  defp take_frac(<<?., _::binary>>), do: throw({:json, "a number ends in ."})
  defp take_frac(rest), do: {"", rest}

  defp take_exp(<<e, rest::binary>>) when e in [?e, ?E] do
    {sign, rest} =
      case rest do
        <<s, r::binary>> when s in [?+, ?-] -> {<<s>>, r}
        r -> {"", r}
      end

    case digits(rest, "") do
      {"", _} -> throw({:json, "a number has an empty exponent"})
      {d, rest} -> {"e" <> sign <> d, rest}
    end
  end

  defp take_exp(rest), do: {"", rest}

  # Elixir's float parser refuses "1e5" without a fraction and raises on overflow: normalise, and saturate.
  defp to_float(int_part, frac, exp) do
    frac = if frac == "", do: ".0", else: frac
    text = int_part <> frac <> exp

    case Float.parse(text) do
      {f, ""} -> f
      _ -> huge_or_tiny(int_part, exp)
    end
  rescue
    ArgumentError -> huge_or_tiny(int_part, exp)
  end

  defp huge_or_tiny(int_part, exp) do
    negative = String.starts_with?(int_part, "-")

    if String.starts_with?(exp, "e-"),
      do: if(negative, do: -0.0, else: 0.0),
      else: if(negative, do: :neg_infinity, else: :infinity)
  end

  defp snippet(text) do
    case text do
      "" -> "end of input"
      _ -> inspect(binary_part(text, 0, min(byte_size(text), 20)))
    end
  end

  # ------------------------------------------------------------------------------------------- writing

  @doc "Compact JSON text of a value (maps, `Ordered`, lists, strings, numbers, booleans, nil)."
  def encode!(value), do: value |> enc(0) |> IO.iodata_to_binary()

  defp enc(nil, _), do: "null"
  defp enc(true, _), do: "true"
  defp enc(false, _), do: "false"
  defp enc(i, _) when is_integer(i), do: Integer.to_string(i)
  defp enc(f, _) when is_float(f), do: Display.float_text(f)

  defp enc(a, _) when a in [:nan, :infinity, :neg_infinity],
    do: raise(ArgumentError, "JSON cannot hold a non-finite number")

  defp enc(a, d) when is_atom(a), do: enc(Atom.to_string(a), d)

  defp enc(s, _) when is_binary(s) do
    unless String.valid?(s), do: raise(ArgumentError, "JSON strings are UTF-8 text")
    Display.json_string(s)
  end

  defp enc(%Ordered{pairs: pairs}, d), do: object_text(pairs, d)

  defp enc(%_{} = s, _),
    do: raise(ArgumentError, "cannot write a #{inspect(s.__struct__)} as JSON")

  defp enc(m, d) when is_map(m), do: object_text(Enum.to_list(m), d)

  defp enc(l, d) when is_list(l) do
    nest!(d)
    ["[", Enum.intersperse(Enum.map(l, &enc(&1, d + 1)), ","), "]"]
  end

  defp enc(other, _), do: raise(ArgumentError, "cannot write #{inspect(other)} as JSON")

  defp object_text(pairs, d) do
    nest!(d)

    members =
      Enum.map(pairs, fn {k, v} ->
        key = if is_atom(k), do: Atom.to_string(k), else: k

        unless is_binary(key),
          do: raise(ArgumentError, "JSON object keys are strings, got #{inspect(k)}")

        [enc(key, d + 1), ":", enc(v, d + 1)]
      end)

    ["{", Enum.intersperse(members, ","), "}"]
  end

  defp nest!(d) when d >= 100, do: raise(ArgumentError, "value nested more than 100 levels deep")
  defp nest!(_), do: :ok
end
