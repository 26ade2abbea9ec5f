defmodule Larder.HTTPRules.Directives do
  @moduledoc """
  Cache directives as larder reads them (spec/HTTP.md §1.4): Cache-Control (a response's or a request's),
  Surrogate-Control (W3C Edge Architecture) and targeted fields such as CDN-Cache-Control (RFC 9213). A number is
  nil when absent; an invalid one is 0.
  """

  alias Larder.HTTPRules.{Date, Dictionary}

  @max_delta_seconds 2_147_483_648
  @flags ~w(no-store no-cache private public must-revalidate proxy-revalidate must-understand)
  @numbers ~w(max-age s-maxage stale-while-revalidate stale-if-error)

  defstruct no_store: false,
            no_cache: false,
            private: false,
            public: false,
            must_revalidate: false,
            proxy_revalidate: false,
            must_understand: false,
            max_age: nil,
            s_maxage: nil,
            stale_while_revalidate: nil,
            stale_if_error: nil

  @type t :: %__MODULE__{}

  @doc "The largest delta-seconds value (RFC 9111 §1.2.2): anything larger counts as this."
  def max_delta_seconds, do: @max_delta_seconds

  @doc "Every line of a Cache-Control field; the first occurrence of a directive wins, even an invalid one."
  def cache_control(lines) do
    {d, _seen} =
      for line <- lines, element <- elements(line), reduce: {%__MODULE__{}, MapSet.new()} do
        {d, seen} ->
          case directive(element) do
            {name, arg} ->
              if name in seen,
                do: {d, seen},
                else: {set_directive(d, name, arg), MapSet.put(seen, name)}

            nil ->
              {d, seen}
          end
      end

    d
  end

  @doc """
  Surrogate-Control: the directives, or nil when the field holds none that larder acts on (then it does not
  govern). Elements targeted at a named surrogate (`no-store;abc`) are skipped; `max-age=N+M` reads N.
  """
  def surrogate_control(lines) do
    {d, _, acted_on} =
      for line <- lines,
          element <- elements(line),
          separators(element, ?;) == [],
          reduce: {%__MODULE__{}, MapSet.new(), false} do
        {d, seen, acted_on} ->
          case directive(element) do
            {name, arg} ->
              if name in seen,
                do: {d, seen, acted_on},
                else:
                  {set_directive(d, name, surrogate_arg(name, arg)), MapSet.put(seen, name),
                   acted_on or name in @flags or name in @numbers}

            nil ->
              {d, seen, acted_on}
          end
      end

    if acted_on, do: d
  end

  defp surrogate_arg("max-age", arg) when is_binary(arg) do
    case :binary.split(arg, "+") do
      [n, m] -> if digits?(n) and digits?(m), do: n, else: arg
      _ -> arg
    end
  end

  defp surrogate_arg(_, arg), do: arg

  @doc "A targeted field (RFC 9213): the directives, or nil when it is absent, empty or invalid."
  def targeted([]), do: nil

  def targeted(lines) do
    case Dictionary.parse(Enum.join(lines, ", ")) do
      {:ok, [_ | _] = members} -> Enum.reduce_while(members, %__MODULE__{}, &targeted_member/2)
      _ -> nil
    end
  end

  defp targeted_member({key, value}, d) do
    cond do
      key in @numbers ->
        if is_integer(value) and value >= 0,
          do: {:cont, set_number(d, key, min(value, @max_delta_seconds))},
          else: {:halt, nil}

      key in @flags or key == "immutable" ->
        if value == true or (key in ["no-cache", "private"] and is_binary(value)),
          do: {:cont, set_flag(d, key)},
          else: {:halt, nil}

      true ->
        {:cont, d}
    end
  end

  @doc "Delta-seconds: one or more ASCII digits, past 2^31 counting as 2^31; nil for anything else."
  def delta_seconds(s) do
    if digits?(s) do
      # Leading zeros dropped first, so that a hostile run of digits is never read as a bignum.
      case String.trim_leading(s, "0") do
        "" -> 0
        n when byte_size(n) > 10 -> @max_delta_seconds
        n -> min(String.to_integer(n), @max_delta_seconds)
      end
    end
  end

  defp digits?(""), do: false
  defp digits?(s), do: for(<<c <- s>>, reduce: true, do: (acc -> acc and c in ?0..?9))

  defp set_directive(d, name, arg) do
    cond do
      name in @flags -> set_flag(d, name)
      name in @numbers -> set_number(d, name, (is_binary(arg) && delta_seconds(arg)) || 0)
      true -> d
    end
  end

  defp set_flag(d, "no-store"), do: %{d | no_store: true}
  defp set_flag(d, "no-cache"), do: %{d | no_cache: true}
  defp set_flag(d, "private"), do: %{d | private: true}
  defp set_flag(d, "public"), do: %{d | public: true}
  defp set_flag(d, "must-revalidate"), do: %{d | must_revalidate: true}
  defp set_flag(d, "proxy-revalidate"), do: %{d | proxy_revalidate: true}
  defp set_flag(d, "must-understand"), do: %{d | must_understand: true}
  defp set_flag(d, "immutable"), do: d

  defp set_number(d, "max-age", v), do: %{d | max_age: v}
  defp set_number(d, "s-maxage", v), do: %{d | s_maxage: v}
  defp set_number(d, "stale-while-revalidate", v), do: %{d | stale_while_revalidate: v}
  defp set_number(d, "stale-if-error", v), do: %{d | stale_if_error: v}

  @doc "The elements of one line of a comma-separated list, trimmed, empty ones dropped; quoted commas do not split."
  def elements(line) do
    cuts = separators(line, ?,)

    {parts, last} =
      Enum.reduce(cuts, {[], 0}, fn i, {acc, start} ->
        {[binary_part(line, start, i - start) | acc], i + 1}
      end)

    [binary_part(line, last, byte_size(line) - last) | parts]
    |> Enum.reverse()
    |> Enum.map(&Date.trim/1)
    |> Enum.reject(&(&1 == ""))
  end

  # The indexes of every `sep` byte outside a quoted string (RFC 9110 §5.6.4: a backslash escapes the next byte
  # inside quotes; an unterminated quoted string runs to the end).
  defp separators(s, sep) do
    {_, _, _, found} =
      for <<c <- s>>, reduce: {0, false, false, []} do
        {i, quoted, escaped, found} ->
          cond do
            quoted and escaped -> {i + 1, true, false, found}
            quoted and c == ?\\ -> {i + 1, true, true, found}
            quoted and c == ?" -> {i + 1, false, false, found}
            quoted -> {i + 1, true, false, found}
            c == ?" -> {i + 1, true, false, found}
            c == sep -> {i + 1, false, false, [i | found]}
            true -> {i + 1, false, false, found}
          end
      end

    Enum.reverse(found)
  end

  # `name` or `name=argument` (split at the first `=`): {lowercase name, argument or nil}, or nil when the name is
  # empty or holds a space or tab. A quoted-string argument is its content with quoted-pairs resolved.
  defp directive(element) do
    [name | rest] = :binary.split(element, "=")

    if name == "" or String.contains?(name, [" ", "\t"]) do
      nil
    else
      {Date.lower(name),
       case rest do
         [] -> nil
         [arg] -> unquote_arg(arg)
       end}
    end
  end

  defp unquote_arg(<<?", _::binary>> = arg) when byte_size(arg) >= 2 do
    if :binary.last(arg) == ?",
      do: unescape(binary_part(arg, 1, byte_size(arg) - 2), []),
      else: arg
  end

  defp unquote_arg(arg), do: arg

  defp unescape(<<?\\, c, rest::binary>>, acc), do: unescape(rest, [c | acc])
  defp unescape(<<?\\>>, acc), do: unescape("", acc)
  defp unescape(<<c, rest::binary>>, acc), do: unescape(rest, [c | acc])
  defp unescape("", acc), do: acc |> Enum.reverse() |> IO.iodata_to_binary()
end
