defmodule Larder.Keys do
  @moduledoc """
  Keys every language derives identically (spec/FORMAT.md §5, spec/STORES.md §2), so an entry written by one is
  found by another.

  `safe_key/1` fits memcached's rules by hashing what does not fit (keeping a readable prefix); `namespaced_key/2`
  prefixes a namespace; `http_key/6` and `url_key/4` turn a request into a key with the query sorted and tracking
  parameters dropped; `selecting_values/2`, `variant_key/3`, `alternate_key/2` and `url_keys/1` are the helpers
  of §5.5 every language offers under these names. `stored_key/2` and `internal_key/3` are what a store writes.
  Lengths and comparisons are over bytes; case changes are ASCII-only.
  """

  @max_key_len 250
  @hashed_prefix_len 180
  @default_drop ["utm_*", "gclid", "fbclid", "msclkid"]
  @codings ["identity", "gzip", "br", "zstd"]

  def default_drop, do: @default_drop
  def codings, do: @codings

  @doc "`key` unchanged if memcached accepts it, else its readable prefix, `#`, and the SHA-256 of the whole key."
  def safe_key(key) when is_binary(key) do
    if byte_size(key) <= @max_key_len and (clean?(key) or not unsafe?(key)) do
      key
    else
      prefix = readable_prefix(key, 0)
      prefix <> "#" <> Base.encode16(:crypto.hash(:sha256, key), case: :lower)
    end
  end

  # A key every store takes as it is (printable ASCII 0x21-0x7E, or UTF-8 above ASCII), four ASCII bytes a step: the
  # common key in one pass, where unsafe?/1 and String.valid?/1 took two byte by byte. Anything else (false) goes
  # the long way, which says what is wrong.
  defp clean?(<<a, b, c, d, rest::binary>>)
       when a > 0x20 and a < 0x7F and b > 0x20 and b < 0x7F and c > 0x20 and c < 0x7F and d > 0x20 and
              d < 0x7F,
       do: clean?(rest)

  defp clean?(<<a, rest::binary>>) when a > 0x20 and a < 0x7F, do: clean?(rest)
  defp clean?(<<c::utf8, rest::binary>>) when c > 0x7F, do: clean?(rest)
  defp clean?(<<>>), do: true
  defp clean?(_), do: false

  defp unsafe?(<<c, _::binary>>) when c <= 0x20 or c == 0x7F, do: true
  defp unsafe?(<<_, rest::binary>>), do: unsafe?(rest)
  defp unsafe?(<<>>), do: false

  defp readable_prefix(<<c, rest::binary>>, n) when c in 0x21..0x7E and n < @hashed_prefix_len,
    do: <<c, readable_prefix(rest, n + 1)::binary>>

  defp readable_prefix(_, _), do: ""

  @doc "Why a store refuses `key` (spec/STORES.md §2), or nil for a key it takes."
  def key_problem(""), do: "empty"

  def key_problem(key) when is_binary(key) and byte_size(key) <= @max_key_len do
    if clean?(key), do: nil, else: prefix_problem(key)
  end

  def key_problem(key), do: prefix_problem(key)

  @doc "Why a store refuses a purge prefix (the key rule, but the empty prefix is allowed), or nil."
  def prefix_problem(prefix) when is_binary(prefix) do
    cond do
      byte_size(prefix) > @max_key_len -> "longer than #{@max_key_len} bytes"
      unsafe?(prefix) -> "holds a control byte or a space (0x00-0x20, 0x7F)"
      not String.valid?(prefix) -> "not UTF-8"
      true -> nil
    end
  end

  def prefix_problem(_), do: "not a binary"

  @doc "`namespace:key` (just `key` when the namespace is empty or nil), made safe."
  def namespaced_key(ns, key) when ns in [nil, ""], do: safe_key(key)
  def namespaced_key(ns, key), do: safe_key(ns <> ":" <> key)

  @doc "The key a store writes for a caller's key under its `prefix` option (spec/STORES.md §2)."
  def stored_key(prefix, key) when prefix in [nil, ""], do: key
  def stored_key(prefix, key), do: safe_key(prefix <> key)

  @doc "The key of a store's own bookkeeping (`lock`, `tag`, `prefixes`) under its `prefix`."
  def internal_key(prefix, purpose, name),
    do: stored_key(prefix, safe_key("larder" <> <<0>> <> purpose <> ":" <> name))

  @doc """
  The key of a request from its parts (spec/FORMAT.md §5.3). Options: `namespace` (default none), `drop` (query
  parameter patterns, default `utm_*, gclid, fbclid, msclkid`; a pattern ending in `*` matches by prefix).
  """
  def http_key(method, scheme, authority, path_and_query, opts \\ []) do
    drop = Keyword.get(opts, :drop, @default_drop)
    scheme = ascii_lower(scheme)
    [without_fragment | _] = :binary.split(path_and_query, "#")

    {path, query} =
      case :binary.split(without_fragment, "?") do
        [p, q] -> {p, q}
        [p] -> {p, ""}
      end

    path = if path == "", do: "/", else: path

    parts =
      query
      |> :binary.split("&", [:global])
      |> Enum.reject(&(&1 == "" or dropped?(param_name(&1), drop)))
      |> Enum.with_index()
      |> Enum.sort_by(fn {part, i} -> {param_name(part), i} end)
      |> Enum.map(&elem(&1, 0))

    base = ascii_upper(method) <> ":" <> scheme <> "://" <> authority(scheme, authority) <> path
    base = if parts == [], do: base, else: base <> "?" <> Enum.join(parts, "&")
    namespaced_key(Keyword.get(opts, :namespace), base)
  end

  @doc "The key of a request given as a URL (`scheme://authority/path?query`): `{:ok, key}` or `{:error, msg}`."
  def url_key(method, url, opts \\ []) do
    case :binary.split(url, "://") do
      [scheme, rest] ->
        {authority, tail} =
          case :binary.match(rest, ["/", "?", "#"]) do
            {i, _} -> {binary_part(rest, 0, i), binary_part(rest, i, byte_size(rest) - i)}
            :nomatch -> {rest, ""}
          end

        {:ok, http_key(method, scheme, authority, tail, opts)}

      _ ->
        {:error, "not an absolute URL (no \"://\"): #{inspect(url)}"}
    end
  end

  defp param_name(part), do: part |> :binary.split("=") |> hd()

  defp dropped?(name, patterns) do
    Enum.any?(patterns, fn pattern ->
      if String.ends_with?(pattern, "*"),
        do: String.starts_with?(name, binary_part(pattern, 0, byte_size(pattern) - 1)),
        else: name == pattern
    end)
  end

  defp authority(scheme, authority) do
    host = authority |> :binary.split("@", [:global]) |> List.last() |> ascii_lower()

    cond do
      String.ends_with?(host, ":") ->
        binary_part(host, 0, byte_size(host) - 1)

      scheme == "http" and String.ends_with?(host, ":80") ->
        binary_part(host, 0, byte_size(host) - 3)

      scheme == "https" and String.ends_with?(host, ":443") ->
        binary_part(host, 0, byte_size(host) - 4)

      true ->
        host
    end
  end

  @doc """
  The selecting values of a request for a marker's header `names` (spec/FORMAT.md §5.4). `request_headers`: the
  request's header lines as ordered `{name, value}` pairs (or `[name, value]` lists); names compare
  case-insensitively; values that are not UTF-8 read with U+FFFD for each invalid sequence.
  """
  def selecting_values(names, request_headers) do
    headers = Enum.map(request_headers, &pair/1)

    Enum.map_join(names, fn name ->
      wanted = ascii_lower(name)

      case for({n, v} <- headers, n == wanted, do: lossy_utf8(v)) do
        [] ->
          name <> "\0absent\n"

        values ->
          elements =
            values
            |> Enum.flat_map(&:binary.split(&1, ",", [:global]))
            |> Enum.map(&trim_sp_tab/1)

          name <> ":" <> Enum.join(elements, ",") <> "\n"
      end
    end)
  end

  defp pair({n, v}), do: {ascii_lower(n), v}
  defp pair([n, v]), do: {ascii_lower(n), v}

  defp trim_sp_tab(s), do: s |> trim_lead() |> trim_trail()

  defp trim_lead(<<c, rest::binary>>) when c in [?\s, ?\t], do: trim_lead(rest)
  defp trim_lead(s), do: s

  defp trim_trail(s) do
    size = byte_size(s)

    if size > 0 and :binary.at(s, size - 1) in [?\s, ?\t],
      do: trim_trail(binary_part(s, 0, size - 1)),
      else: s
  end

  @doc """
  The variant key a request selects under `marker` (`%{"vary" => names, "generation" => g}`, generation optional;
  atom keys work too).
  """
  def variant_key(base_key, marker, request_headers) do
    vary = field(marker, "vary") || raise ArgumentError, "a marker has vary"
    values = selecting_values(vary, request_headers)

    middle =
      case field(marker, "generation") do
        nil -> ""
        g -> "\0generation:" <> g <> "\n"
      end

    safe_key(base_key <> "\n" <> middle <> values)
  end

  defp field(marker, name), do: Map.get(marker, name, Map.get(marker, String.to_atom(name)))

  @doc "Where the response under `entry_key` is kept in another coding: identity, gzip, br or zstd (§5.5)."
  def alternate_key(entry_key, coding) when coding in @codings,
    do: safe_key(entry_key <> "\n\0coding:" <> coding)

  def alternate_key(_, coding),
    do:
      raise(
        ArgumentError,
        "a coding is one of #{Enum.join(@codings, ", ")}, not #{inspect(coding)}"
      )

  @doc "What a URL purge removes: the base key and its four alternates."
  def url_keys(base_key), do: [base_key | Enum.map(@codings, &alternate_key(base_key, &1))]

  @doc """
  `bytes` as UTF-8 with each maximal invalid subpart replaced by U+FFFD, as Rust's `from_utf8_lossy` and Python's
  `errors="replace"` do.
  """
  def lossy_utf8(bytes) do
    if String.valid?(bytes), do: bytes, else: lossy(bytes, [])
  end

  defp lossy(<<>>, acc), do: acc |> Enum.reverse() |> IO.iodata_to_binary()

  defp lossy(<<c::utf8, rest::binary>>, acc), do: lossy(rest, [<<c::utf8>> | acc])

  defp lossy(<<lead, rest::binary>>, acc) do
    ranges =
      cond do
        lead in 0xC2..0xDF -> [0x80..0xBF]
        lead == 0xE0 -> [0xA0..0xBF, 0x80..0xBF]
        lead in 0xE1..0xEC or lead in 0xEE..0xEF -> [0x80..0xBF, 0x80..0xBF]
        lead == 0xED -> [0x80..0x9F, 0x80..0xBF]
        lead == 0xF0 -> [0x90..0xBF, 0x80..0xBF, 0x80..0xBF]
        lead in 0xF1..0xF3 -> [0x80..0xBF, 0x80..0xBF, 0x80..0xBF]
        lead == 0xF4 -> [0x80..0x8F, 0x80..0xBF, 0x80..0xBF]
        true -> []
      end

    lossy(skip_subpart(rest, ranges), ["\uFFFD" | acc])
  end

  defp skip_subpart(<<c, rest::binary>> = all, [range | more]) do
    if c in range, do: skip_subpart(rest, more), else: all
  end

  defp skip_subpart(rest, _), do: rest

  defp ascii_upper(s), do: for(<<c <- s>>, into: "", do: <<if(c in ?a..?z, do: c - 32, else: c)>>)
  defp ascii_lower(s), do: for(<<c <- s>>, into: "", do: <<if(c in ?A..?Z, do: c + 32, else: c)>>)
end
