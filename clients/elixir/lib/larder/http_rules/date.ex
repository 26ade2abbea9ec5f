defmodule Larder.HTTPRules.Date do
  @moduledoc """
  HTTP-dates (RFC 9110 §5.6.7, spec/HTTP.md §1.5), read strictly: IMF-fixdate, RFC 850 and asctime; names in any
  case, the weekday not checked against the date, everything else exactly as the grammar says. An `Expires` that is
  not an HTTP-date must read as "already expired", so nothing lenient is used here.
  """

  @months ~w(jan feb mar apr may jun jul aug sep oct nov dec)
  @days ~w(mon tue wed thu fri sat sun)
  @full_days ~w(monday tuesday wednesday thursday friday saturday sunday)
  @month_names ~w(Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
  @day_names ~w(Mon Tue Wed Thu Fri Sat Sun)
  @unix_epoch_seconds 62_167_219_200

  @doc """
  `text` (spaces and tabs around it ignored) as ms since the epoch, or nil. `now_ms` resolves RFC 850's two-digit
  year (the most recent year with those digits not more than 50 years ahead).
  """
  def parse(text, now_ms) when is_binary(text) and is_integer(now_ms) do
    t = trim(text)

    cond do
      imf_fixdate?(t) -> imf_fixdate(t)
      rfc850?(t) -> rfc850(t, now_ms)
      asctime?(t) -> asctime(t)
      true -> nil
    end
  end

  # "Sun, 06 Nov 1994 08:49:37 GMT"
  defp imf_fixdate?(t) do
    byte_size(t) == 29 and at(t, 3) == ?, and at(t, 4) == ?\s and at(t, 7) == ?\s and
      at(t, 11) == ?\s and
      at(t, 16) == ?\s and at(t, 25) == ?\s and alpha?(part(t, 0, 3)) and alpha?(part(t, 8, 3)) and
      alpha?(part(t, 26, 3))
  end

  defp imf_fixdate(t) do
    with true <- lower(part(t, 0, 3)) in @days,
         "gmt" <- lower(part(t, 26, 3)),
         day when day != nil <- num(part(t, 5, 2)),
         year when year != nil <- num(part(t, 12, 4)),
         {h, m, s} <- clock(part(t, 17, 8)) do
      epoch_ms(year, part(t, 8, 3), day, h, m, s)
    else
      _ -> nil
    end
  end

  # "Sunday, 06-Nov-94 08:49:37 GMT"
  defp rfc850?(t) do
    case :binary.match(t, ",") do
      {comma, 1} when comma > 0 -> alpha?(part(t, 0, comma)) and byte_size(t) == comma + 24
      _ -> false
    end
  end

  defp rfc850(t, now_ms) do
    {comma, 1} = :binary.match(t, ",")
    r = binary_part(t, comma, 24)

    with true <-
           at(r, 1) == ?\s and at(r, 4) == ?- and at(r, 8) == ?- and at(r, 11) == ?\s and
             at(r, 20) == ?\s and alpha?(part(r, 5, 3)) and alpha?(part(r, 21, 3)),
         true <- lower(part(t, 0, comma)) in @full_days,
         "gmt" <- lower(part(r, 21, 3)),
         day when day != nil <- num(part(r, 2, 2)),
         short when short != nil <- num(part(r, 9, 2)),
         {h, m, s} <- clock(part(r, 12, 8)) do
      {{now_year, _, _}, _} = :calendar.system_time_to_universal_time(now_ms, :millisecond)
      year = div(now_year, 100) * 100 + short
      year = if year > now_year + 50, do: year - 100, else: year
      epoch_ms(year, part(r, 5, 3), day, h, m, s)
    else
      _ -> nil
    end
  end

  # "Sun Nov  6 08:49:37 1994"
  defp asctime?(t) do
    byte_size(t) == 24 and at(t, 3) == ?\s and at(t, 7) == ?\s and at(t, 10) == ?\s and
      at(t, 19) == ?\s and alpha?(part(t, 0, 3)) and alpha?(part(t, 4, 3))
  end

  defp asctime(t) do
    day_text = if at(t, 8) == ?\s, do: part(t, 9, 1), else: part(t, 8, 2)

    with true <- lower(part(t, 0, 3)) in @days,
         day when day != nil <- num(day_text),
         {h, m, s} <- clock(part(t, 11, 8)),
         year when year != nil <- num(part(t, 20, 4)) do
      epoch_ms(year, part(t, 4, 3), day, h, m, s)
    else
      _ -> nil
    end
  end

  defp clock(<<h::binary-2, ?:, m::binary-2, ?:, s::binary-2>>) do
    case {num(h), num(m), num(s)} do
      {h, m, s} when h != nil and m != nil and s != nil -> {h, m, s}
      _ -> nil
    end
  end

  defp clock(_), do: nil

  # Day 31 of a shorter month and second 60 roll over into the next, as the other implementations do.
  defp epoch_ms(year, month, day, h, m, s) do
    index = Enum.find_index(@months, &(&1 == lower(month)))

    if index == nil or day < 1 or day > 31 or h > 23 or m > 59 or s > 60 or year < 1970 do
      nil
    else
      days = :calendar.date_to_gregorian_days(year, index + 1, 1) + day - 1
      (days * 86_400 + h * 3600 + m * 60 + s - @unix_epoch_seconds) * 1000
    end
  end

  @doc "`ms` since the epoch as an IMF-fixdate (`Tue, 14 Nov 2023 22:13:20 GMT`)."
  def format(ms) when is_integer(ms) do
    {{y, mo, d} = date, {h, mi, s}} = :calendar.system_time_to_universal_time(ms, :millisecond)
    weekday = Enum.at(@day_names, :calendar.day_of_the_week(date) - 1)

    :io_lib.format("~s, ~2..0B ~s ~4..0B ~2..0B:~2..0B:~2..0B GMT", [
      weekday,
      d,
      Enum.at(@month_names, mo - 1),
      y,
      h,
      mi,
      s
    ])
    |> IO.iodata_to_binary()
  end

  defp at(t, i), do: :binary.at(t, i)
  defp part(t, start, len), do: binary_part(t, start, len)

  defp alpha?(""), do: false

  defp alpha?(s),
    do: for(<<c <- s>>, reduce: true, do: (acc -> acc and (c in ?a..?z or c in ?A..?Z)))

  defp num(""), do: nil

  defp num(s) do
    if for(<<c <- s>>, reduce: true, do: (acc -> acc and c in ?0..?9)),
      do: String.to_integer(s),
      else: nil
  end

  @doc false
  def lower(s), do: for(<<c <- s>>, into: "", do: <<if(c in ?A..?Z, do: c + 32, else: c)>>)

  @doc false
  # Spaces and tabs removed at both ends (bytes, whatever the encoding).
  def trim(s), do: s |> trim_leading() |> trim_trailing(byte_size(s))

  defp trim_leading(<<c, rest::binary>>) when c in [?\s, ?\t], do: trim_leading(rest)
  defp trim_leading(s), do: s

  defp trim_trailing(s, n) do
    n = min(n, byte_size(s))

    if n > 0 and :binary.at(s, n - 1) in [?\s, ?\t],
      do: trim_trailing(s, n - 1),
      else: binary_part(s, 0, n)
  end
end
