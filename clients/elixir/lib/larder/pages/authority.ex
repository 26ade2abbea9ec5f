defmodule Larder.Pages.Authority do
  @moduledoc """
  The scheme and authority a page written by an app is keyed on (spec/FORMAT.md §5.3), decided as the front decides
  them, because the front serves that page to everyone who asks for that authority (issue 32, finding 7):

  - the configured `site` (`shop.example`, `shop.example:8443`) when there is one, and a request whose Host, once
    normalised (lowercase, default port removed), is not the site's is not stored;
  - else the request's Host;
  - `X-Forwarded-Host`, `X-Forwarded-Proto` and `Forwarded` only from a peer in `trusted_proxies` (CIDRs, default
    none), as `larder serve --trusted-proxies` reads them; where they disagree, nothing is stored;
  - a Host that is not a plain `host[:port]` (a path, query, fragment, userinfo, backslash, space, control byte or
    percent sign, a port that is not 1–5 digits up to 65535, a malformed bracketed IPv6 literal), a missing or
    repeated Host, or a target that is not origin-form (an absolute-form target, whatever its authority and Host):
    not stored.

  The scheme is the page cache's `scheme` option when set, else a trusted proxy's forwarded protocol, else the
  connection's (spec/HTTP.md §2 step 5).

  Every refusal is `:host`, which `Larder.Pages` reports as the not_stored reason `"host"`.
  """

  import Bitwise

  @doc """
  Parses `trusted_proxies` (addresses or CIDRs, `10.0.0.0/8`, `::1`): a list for `trusted?/2`. Raises
  ArgumentError for an entry that is neither.
  """
  def networks(entries) when is_list(entries), do: Enum.map(entries, &network/1)

  def networks(other),
    do: raise(ArgumentError, "trusted_proxies is a list of CIDRs, not #{inspect(other)}")

  defp network(entry) when is_binary(entry) do
    {address, length} =
      case String.split(String.trim(entry), "/", parts: 2) do
        [a] -> {a, nil}
        [a, l] -> {a, l}
      end

    with {:ok, ip} <- :inet.parse_strict_address(String.to_charlist(address)),
         bits = if(tuple_size(ip) == 4, do: 32, else: 128),
         {:ok, len} <- prefix_length(length, bits) do
      {bits, len, to_integer(ip) >>> (bits - len)}
    else
      _ ->
        raise ArgumentError,
              "trusted_proxies: #{inspect(entry)} is not an IP address or a network such as 10.0.0.0/8"
    end
  end

  defp network(entry),
    do: raise(ArgumentError, "trusted_proxies: #{inspect(entry)} is not a string")

  defp prefix_length(nil, bits), do: {:ok, bits}

  defp prefix_length(text, bits) do
    case Integer.parse(text) do
      {n, ""} when n >= 0 and n <= bits -> {:ok, n}
      _ -> :error
    end
  end

  @doc "Whether `peer` (an IP tuple or its text; nil for unknown) is in `networks` (an IPv4-mapped IPv6 counts as IPv4)."
  def trusted?([], _peer), do: false
  def trusted?(_networks, nil), do: false

  def trusted?(networks, peer) when is_binary(peer) do
    case :inet.parse_strict_address(String.to_charlist(peer)) do
      {:ok, ip} -> trusted?(networks, ip)
      _ -> false
    end
  end

  def trusted?(networks, {0, 0, 0, 0, 0, 0xFFFF, hi, lo}),
    do: trusted?(networks, {hi >>> 8, hi &&& 0xFF, lo >>> 8, lo &&& 0xFF})

  def trusted?(networks, ip) when is_tuple(ip) and tuple_size(ip) in [4, 8] do
    bits = if tuple_size(ip) == 4, do: 32, else: 128
    n = to_integer(ip)
    Enum.any?(networks, fn {b, len, net} -> b == bits and n >>> (bits - len) == net end)
  end

  def trusted?(_networks, _peer), do: false

  defp to_integer({a, b, c, d}), do: a <<< 24 ||| b <<< 16 ||| c <<< 8 ||| d

  defp to_integer(ip) when tuple_size(ip) == 8,
    do: ip |> Tuple.to_list() |> Enum.reduce(0, fn part, acc -> acc <<< 16 ||| part end)

  @doc """
  Whether `text` is a plain authority: a name of letters, digits, `-`, `.`, `_`, `~` (or an IPv4 address), or a
  bracketed IPv6 literal, then optionally `:` and a port of 1–5 digits up to 65535. Nothing else can ride along
  into a key.
  """
  def valid?(text) when is_binary(text) do
    case split(text) do
      {:ok, _host, _port} -> true
      :error -> false
    end
  end

  def valid?(_), do: false

  defp split("[" <> rest) do
    with [literal, after_bracket] <- :binary.split(rest, "]"),
         {:ok, _} <- :inet.parse_ipv6strict_address(String.to_charlist(literal)),
         {:ok, port} <- port(after_bracket) do
      {:ok, "[" <> literal <> "]", port}
    else
      _ -> :error
    end
  end

  defp split(text) do
    {host, port_part} =
      case :binary.split(text, ":") do
        [h] -> {h, ""}
        [h, p] -> {h, ":" <> p}
      end

    with true <- host != "" and name?(host),
         {:ok, port} <- port(port_part) do
      {:ok, host, port}
    else
      _ -> :error
    end
  end

  defp name?(host), do: for(<<c <- host>>, reduce: true, do: (acc -> acc and name_byte?(c)))

  defp name_byte?(c),
    do: c in ?a..?z or c in ?A..?Z or c in ?0..?9 or c in [?-, ?., ?_, ?~]

  defp port(""), do: {:ok, nil}

  defp port(":" <> digits) when byte_size(digits) in 1..5 do
    if digits =~ ~r/\A[0-9]+\z/ and String.to_integer(digits) <= 65_535,
      do: {:ok, String.to_integer(digits)},
      else: :error
  end

  defp port(_), do: :error

  @doc "The authority as keys carry it (the front's): lowercase, without the scheme's default port. Valid input only."
  def normalise(scheme, text) do
    {:ok, host, port} = split(text)
    host = lower(host)

    case {scheme, port} do
      {_, nil} -> host
      {"http", 80} -> host
      {"https", 443} -> host
      {_, p} -> host <> ":" <> Integer.to_string(p)
    end
  end

  defp lower(s), do: for(<<c <- s>>, into: "", do: <<if(c in ?A..?Z, do: c + 32, else: c)>>)

  @doc """
  The `{scheme, authority, target}` a request's page is keyed on, or `:host` when none may be. `request` is a
  `Larder.Pages.Request`; `site` a valid authority or nil; `networks` from `networks/1`; `scheme` the page cache's
  `scheme` option (`"http"`, `"https"`) or nil.
  """
  def resolve(request, site, networks, scheme \\ nil) do
    hosts = for {name, value} <- request.headers, lower(to_string(name)) == "host", do: value

    with true <- length(hosts) <= 1,
         {:ok, claimed_scheme, host} <- claimed(request, networks),
         scheme = scheme || claimed_scheme,
         {:ok, target} <- target(request.target),
         true <- valid?(host),
         authority = normalise(scheme, host),
         true <- site == nil or normalise(scheme, site) == authority do
      {scheme, authority, target}
    else
      _ -> :host
    end
  end

  # The scheme and host: the request's, or a trusted proxy's claims where it makes them.
  defp claimed(request, networks) do
    scheme = lower(request.scheme || "http")

    if trusted?(networks, request.peer) do
      with {:ok, proto, host} <- forwarded(request.headers) do
        {:ok, proto || scheme, host || request.authority}
      end
    else
      {:ok, scheme, request.authority}
    end
  end

  # A trusted proxy's X-Forwarded-Proto / X-Forwarded-Host (first element of the first line) and the first element of
  # Forwarded, which must agree where both speak (forwarding.rs `claimed`).
  defp forwarded(headers) do
    headers = for {n, v} <- headers, do: {lower(to_string(n)), to_string(v)}

    first = fn name ->
      case List.keyfind(headers, name, 0) do
        nil ->
          nil

        {_, v} ->
          v
          |> :binary.split(",")
          |> hd()
          |> String.trim()
          |> then(&if(&1 == "", do: nil, else: &1))
      end
    end

    claims = %{proto: first.("x-forwarded-proto"), host: first.("x-forwarded-host")}

    pairs =
      case List.keyfind(headers, "forwarded", 0) do
        nil ->
          []

        {_, v} ->
          for pair <- v |> :binary.split(",") |> hd() |> :binary.split(";", [:global]),
              [name, value] <- [:binary.split(pair, "=")],
              slot = forwarded_slot(name),
              slot != nil,
              do: {slot, value |> String.trim() |> String.trim("\"")}
      end

    claims =
      Enum.reduce_while(pairs, {:ok, claims}, fn {slot, value}, {:ok, acc} ->
        case acc[slot] do
          nil ->
            {:cont, {:ok, Map.put(acc, slot, value)}}

          existing ->
            if lower(existing) == lower(value),
              do: {:cont, {:ok, acc}},
              else: {:halt, :disagree}
        end
      end)

    with {:ok, %{proto: proto, host: host}} <- claims,
         true <- Enum.all?([proto, host], &(&1 == nil or ascii?(&1))),
         proto = proto && lower(proto),
         true <- proto in [nil, "http", "https"] do
      {:ok, proto, host}
    else
      _ -> :error
    end
  end

  defp forwarded_slot(name) do
    case lower(String.trim(name)) do
      "proto" -> :proto
      "host" -> :host
      _ -> nil
    end
  end

  defp ascii?(s), do: for(<<c <- s>>, reduce: true, do: (acc -> acc and c in 0x20..0x7E))

  # An origin-form target as it is; anything else (an absolute-form target above all) names no page: RFC 9112 §3.2.2
  # has a server ignore the Host of an absolute-form request and use the target's authority, which a direct sender
  # chooses (spec/HTTP.md §2 step 2).
  defp target("/" <> _ = target), do: {:ok, target}
  defp target(_), do: :error
end
