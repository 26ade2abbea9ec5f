defmodule Larder.HTTPRules.Dictionary do
  @moduledoc """
  RFC 8941 Structured Field Dictionaries, the syntax of targeted cache fields such as CDN-Cache-Control (RFC 9213,
  spec/HTTP.md §1.4.2): a strict parser of the version RFC 9213 is defined on (no Date or Display String items).
  Parameters are parsed (a syntax error in one fails the field) and dropped. A repeated key keeps its last value.

  Values: integers, booleans and strings (binaries) as themselves; the types no directive takes as
  `{:token, t}`, `{:decimal, text}`, `{:bytes, b}`, `{:inner_list, items}`.
  """

  @token_chars ~c"!#$%&'*+-.^_`|~:/"

  @doc "`{:ok, [{key, value}]}` (keys in order of first appearance, each with its last value) or `:error`."
  def parse(text) when is_binary(text) do
    if printable?(text), do: members(skip(text, ~c" "), []), else: :error
  catch
    :invalid -> :error
  end

  defp printable?(text),
    do: for(<<c <- text>>, reduce: true, do: (acc -> acc and (c in 0x20..0x7E or c == ?\t)))

  defp members("", acc), do: {:ok, finish(acc)}

  defp members(text, acc) do
    {key, rest} = key(text)

    {value, rest} =
      case rest do
        "=" <> rest -> item_or_inner_list(rest)
        _ -> {true, parameters(rest)}
      end

    acc = [{key, value} | acc]

    case skip(rest, ~c" \t") do
      "" ->
        {:ok, finish(acc)}

      "," <> rest ->
        case skip(rest, ~c" \t") do
          "" -> throw(:invalid)
          rest -> members(rest, acc)
        end

      _ ->
        throw(:invalid)
    end
  end

  # First appearance order, last value.
  defp finish(reversed) do
    pairs = Enum.reverse(reversed)
    last = Map.new(pairs)
    pairs |> Enum.map(&elem(&1, 0)) |> Enum.uniq() |> Enum.map(&{&1, Map.fetch!(last, &1)})
  end

  defp skip(<<c, rest::binary>> = text, chars),
    do: if(c in chars, do: skip(rest, chars), else: text)

  defp skip("", _), do: ""

  defp key(<<c, _::binary>> = text) when c in ?a..?z or c == ?* do
    n = span(text, 1, &(&1 in ?a..?z or &1 in ?0..?9 or &1 in ~c"_-.*"))
    <<key::binary-size(n), rest::binary>> = text
    {key, rest}
  end

  defp key(_), do: throw(:invalid)

  # How many bytes from `from` on satisfy `ok?`, plus `from`.
  defp span(text, from, ok?) do
    if from < byte_size(text) and ok?.(:binary.at(text, from)),
      do: span(text, from + 1, ok?),
      else: from
  end

  defp item_or_inner_list("(" <> rest), do: inner_list(rest, [])

  defp item_or_inner_list(text) do
    {value, rest} = bare_item(text)
    {value, parameters(rest)}
  end

  defp inner_list(text, items) do
    case skip(text, ~c" ") do
      ")" <> rest ->
        {{:inner_list, Enum.reverse(items)}, parameters(rest)}

      text ->
        {value, rest} = bare_item(text)
        rest = parameters(rest)

        case rest do
          <<c, _::binary>> when c in [?\s, ?)] -> inner_list(rest, [value | items])
          _ -> throw(:invalid)
        end
    end
  end

  defp parameters(";" <> rest) do
    {_key, rest} = key(skip(rest, ~c" "))

    case rest do
      "=" <> rest ->
        {_, rest} = bare_item(rest)
        parameters(rest)

      _ ->
        parameters(rest)
    end
  end

  defp parameters(text), do: text

  defp bare_item(<<c, _::binary>> = text) when c == ?- or c in ?0..?9, do: number(text)
  defp bare_item("\"" <> rest), do: string(rest, [])
  defp bare_item(":" <> rest), do: byte_sequence(rest)
  defp bare_item("?1" <> rest), do: {true, rest}
  defp bare_item("?0" <> rest), do: {false, rest}

  defp bare_item(<<c, _::binary>> = text) when c in ?a..?z or c in ?A..?Z or c == ?* do
    n = span(text, 1, &(&1 in ?a..?z or &1 in ?A..?Z or &1 in ?0..?9 or &1 in @token_chars))
    <<token::binary-size(n), rest::binary>> = text
    {{:token, token}, rest}
  end

  defp bare_item(_), do: throw(:invalid)

  defp number(text) do
    {sign, digits_at} = if :binary.at(text, 0) == ?-, do: {-1, 1}, else: {1, 0}
    whole_end = span(text, digits_at, &(&1 in ?0..?9))
    whole = whole_end - digits_at
    if whole == 0, do: throw(:invalid)

    case binary_part(text, whole_end, byte_size(text) - whole_end) do
      "." <> _ ->
        frac_end = span(text, whole_end + 1, &(&1 in ?0..?9))
        frac = frac_end - whole_end - 1
        if whole > 12 or frac < 1 or frac > 3, do: throw(:invalid)
        <<decimal::binary-size(frac_end), rest::binary>> = text
        {{:decimal, decimal}, rest}

      rest ->
        if whole > 15, do: throw(:invalid)
        {sign * String.to_integer(binary_part(text, digits_at, whole)), rest}
    end
  end

  defp string("\\" <> <<c, rest::binary>>, acc) when c in [?", ?\\], do: string(rest, [c | acc])
  defp string("\"" <> rest, acc), do: {acc |> Enum.reverse() |> IO.iodata_to_binary(), rest}
  defp string(<<c, rest::binary>>, acc) when c != ?\\ and c != ?\t, do: string(rest, [c | acc])
  defp string(_, _), do: throw(:invalid)

  defp byte_sequence(text) do
    case :binary.split(text, ":") do
      [content, rest] ->
        unless for(<<c <- content>>, reduce: true, do: (acc -> acc and base64_char?(c))),
          do: throw(:invalid)

        data = String.trim_trailing(content, "=")
        padding = byte_size(content) - byte_size(data)
        need = rem(4 - rem(byte_size(data), 4), 4)

        if String.contains?(data, "=") or rem(byte_size(data), 4) == 1 or padding > need,
          do: throw(:invalid)

        case Base.decode64(data, padding: false) do
          {:ok, bytes} -> {{:bytes, bytes}, rest}
          :error -> throw(:invalid)
        end

      _ ->
        throw(:invalid)
    end
  end

  defp base64_char?(c), do: c in ?a..?z or c in ?A..?Z or c in ?0..?9 or c in ~c"+/="
end
