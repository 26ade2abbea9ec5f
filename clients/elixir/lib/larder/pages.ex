defmodule Larder.Pages do
  @moduledoc """
  Page caching for larder's front: an app writes the pages it renders into the shared store, under exactly the key
  `larder serve --store URL` looks them up under, so the front answers later requests without the app. The Elixir
  side of Python's `larder.pages`, Go's `pages` and TypeScript's `PageCache`.

  - **Which responses**: the ones the front's own rules would store (`Larder.HTTPRules`, spec/HTTP.md §1). A
    handler opts in with `front_headers/2`: `Surrogate-Control: max-age=…`, which larder honours and never passes on.
  - **Under which key**: spec/FORMAT.md §5.3 from the request as the app received it (GET, its scheme, its
    authority, its path and query as sent, the front's `--namespace` and dropped query parameters); a response
    with `Vary` goes under a variant key behind a marker (§5.4), as the front writes them. The authority is the
    configured `site`, else the request's Host; forwarded fields count only from `trusted_proxies`; a Host that is
    not a plain `host[:port]`, or that is not the site's, stores nothing (`{:not_stored, "host"}`), because the front
    would serve the page to everyone asking for the authority it names (`Larder.Pages.Authority`).
  - **What**: the entry the front would have made (its `prepare`): end-to-end headers without Content-Length, `Age`
    and the fields meant for larder (`Surrogate-*`, `Cache-Tag`), the body's coding, `Age` and `Date`, freshness
    and stale window from the rules, tags from `Surrogate-Key` (space-separated) and `Cache-Tag`
    (comma-separated), uncompressed as the front stores its own.
  - **Purge**: `purge_tag/2` (every front reading the store stops serving the page) and `purge_url/2`.

  A failed store write is counted (`stats/1`) and returned, never raised: the app's response goes out whatever
  the store does. `Larder.Pages.HTTPD` is the glue for an `:inets` `:httpd` app.

      {:ok, pages} = Larder.Pages.new("memcached://127.0.0.1:11211", namespace: "app")
      headers = [{"content-type", "text/html"} | Larder.Pages.front_headers(60, tags: ["post:7"])]
      Larder.Pages.save(pages, request, 200, headers, body, started_ms)
  """

  alias Larder.{Entry, Header, HTTPRules, Keys, Response, Store}
  alias Larder.HTTPRules.Date
  alias Larder.Pages.Authority

  @default_max_body 8 * 1024 * 1024
  # Always hop-by-hop (RFC 9110 §7.6.1), whatever Connection says: never stored.
  @hop_by_hop ~w(connection keep-alive proxy-connection proxy-authenticate proxy-authentication-info
                 proxy-authorization te trailer transfer-encoding upgrade)
  # Fields that steer larder, not passed on by the front (respond.rs CONSUMED), nor stored.
  @consumed ~w(surrogate-control surrogate-key cache-tag)
  @outcomes ~w(stored errors too-large method status no-store request-no-store private authorization
               set-cookie vary-star no-explicit-freshness host)

  defstruct [
    :store,
    :counters,
    namespace: nil,
    drop: nil,
    site: nil,
    scheme: nil,
    trusted_proxies: [],
    rules: %HTTPRules.Rules{},
    max_body: @default_max_body
  ]

  @type t :: %__MODULE__{}

  defmodule Request do
    @moduledoc """
    A request as the app received it: `authority` its Host field; `target` the request target as sent (the path and
    query, not decoded, or an absolute URL); `headers` its `{name, value}` lines in order (names in any case);
    `peer` the address it came from (an IP tuple or its text; only a peer in the page cache's `trusted_proxies`
    may name the scheme and host through forwarded fields).
    """
    @enforce_keys [:method, :authority, :target]
    defstruct [:method, :authority, :target, scheme: "http", headers: [], peer: nil]
  end

  @doc """
  A page cache over `store` (a `Larder.Store` handle or a store URL). Options, set as the front is set:
  `namespace` (`--namespace`), `drop` (`--drop-query-params`, default larder's list), `rules` (a
  `Larder.HTTPRules.Rules` or its settings), `max_body` (`--max-body`, default 8 MiB), `site` (the authority the
  app serves, `shop.example` or `shop.example:8443`: pages are keyed on it, and a request whose Host is another is
  not stored), `trusted_proxies` (addresses or CIDRs whose `X-Forwarded-Host`, `X-Forwarded-Proto` and
  `Forwarded` are believed, as `--trusted-proxies`; default none), `scheme` (`"http"` or `"https"`: the scheme every
  page is keyed on, before a trusted proxy's and the connection's; default none). Raises ArgumentError for a bad
  option.
  """
  def new(store, opts \\ [])

  def new(url, opts) when is_binary(url) do
    with {:ok, store} <- Larder.Stores.open(url), do: new(store, opts)
  end

  def new(%Store{} = store, opts) do
    rules =
      case Keyword.get(opts, :rules, %HTTPRules.Rules{}) do
        %HTTPRules.Rules{} = r -> r
        settings -> HTTPRules.Rules.new(settings)
      end

    max_body = Keyword.get(opts, :max_body, @default_max_body)

    unless is_integer(max_body) and max_body >= 0,
      do: raise(ArgumentError, "max_body must be a non-negative integer")

    site = Keyword.get(opts, :site)

    unless site == nil or Authority.valid?(site),
      do: raise(ArgumentError, "site must be a plain host[:port], not #{inspect(site)}")

    trusted = Authority.networks(Keyword.get(opts, :trusted_proxies, []))
    scheme = Keyword.get(opts, :scheme)

    unless scheme in [nil, "http", "https"],
      do: raise(ArgumentError, "scheme must be \"http\" or \"https\", not #{inspect(scheme)}")

    {:ok,
     %__MODULE__{
       store: store,
       counters: :counters.new(length(@outcomes), [:write_concurrency]),
       namespace: Keyword.get(opts, :namespace),
       drop: Keyword.get(opts, :drop, Keys.default_drop()),
       site: site,
       scheme: scheme,
       trusted_proxies: trusted,
       rules: rules,
       max_body: max_body
     }}
  end

  @doc """
  Headers that opt a response in to the front for `ttl` seconds, whatever its Cache-Control tells browsers:
  `Surrogate-Control` (honoured by larder, never passed on) and, with `tags:`, `Surrogate-Key`. Options:
  `tags`, `stale_while_revalidate`, `stale_if_error` (seconds).
  """
  def front_headers(ttl, opts \\ []) do
    unless is_integer(ttl) and ttl > 0,
      do: raise(ArgumentError, "ttl must be positive whole seconds, got #{inspect(ttl)}")

    directives =
      ["max-age=#{ttl}"] ++
        for name <- [:stale_while_revalidate, :stale_if_error],
            value = Keyword.get(opts, name),
            value != nil do
          unless is_integer(value) and value >= 0,
            do: raise(ArgumentError, "#{name} must be whole seconds, got #{inspect(value)}")

          "#{String.replace(Atom.to_string(name), "_", "-")}=#{value}"
        end

    tags = Keyword.get(opts, :tags, [])

    for tag <- tags,
        not is_binary(tag) or tag == "" or String.contains?(tag, [" ", "\t", "\r", "\n", ","]),
        do:
          raise(
            ArgumentError,
            "a tag is a non-empty string without spaces or commas: #{inspect(tag)}"
          )

    [{"surrogate-control", Enum.join(directives, ", ")}] ++
      if tags == [], do: [], else: [{"surrogate-key", Enum.join(tags, " ")}]
  end

  @doc """
  The key the front looks `request` up under (FORMAT.md §5.3; for a varying page, its marker's): `{:ok, key}`, or
  `{:not_stored, "host"}` when the request names no authority a page may be stored under (`Larder.Pages.Authority`).
  """
  def key(%__MODULE__{} = pages, %Request{} = r) do
    case Authority.resolve(r, pages.site, pages.trusted_proxies, pages.scheme) do
      {scheme, authority, target} ->
        {:ok, Keys.http_key("GET", scheme, authority, target, key_opts(pages))}

      :host ->
        {:not_stored, "host"}
    end
  end

  defp key_opts(pages), do: [namespace: pages.namespace, drop: pages.drop]

  @doc """
  Stores a rendered response if the front's rules allow it. `{:ok, key}` (the key it went under), `{:not_stored,
  reason}` (`"host"` for a request whose authority may not be keyed on, a reason of `Larder.HTTPRules.storage/7`,
  or `"too-large"`), or `{:error, reason}` when the store failed. `request_time_ms` is when the app started on the
  request.
  """
  def save(%__MODULE__{} = pages, %Request{} = r, status, headers, body, request_time_ms)
      when is_integer(status) and is_list(headers) and is_binary(body) do
    case key(pages, r) do
      {:ok, base} ->
        save(pages, r, base, status, headers, body, request_time_ms)

      {:not_stored, reason} ->
        count(pages, reason)
        {:not_stored, reason}
    end
  end

  defp save(pages, r, base, status, headers, body, request_time_ms) do
    now = Store.now_ms()
    response_lines = HTTPRules.lowercase(headers)

    case HTTPRules.storage(
           pages.rules,
           r.method,
           r.headers,
           status,
           response_lines,
           request_time_ms,
           now
         ) do
      {:not_stored, reason} ->
        count(pages, reason)
        {:not_stored, reason}

      {:store, _} when byte_size(body) > pages.max_body ->
        count(pages, "too-large")
        {:not_stored, "too-large"}

      {:store, plan} ->
        case write(pages, r, base, status, response_lines, body, plan, now) do
          {:ok, key} ->
            count(pages, "stored")
            {:ok, key}

          {:error, _} = error ->
            count(pages, "errors")
            error
        end
    end
  end

  @doc "What this page cache did: `%{\"stored\" => n, \"errors\" => n, reason => n, …}`."
  def stats(%__MODULE__{counters: c}) do
    for {name, i} <- Enum.with_index(@outcomes, 1), into: %{}, do: {name, :counters.get(c, i)}
  end

  defp count(pages, outcome),
    do: :counters.add(pages.counters, Enum.find_index(@outcomes, &(&1 == outcome)) + 1, 1)

  defp write(pages, r, base, status, lines, body, plan, now) do
    {response, tags} = prepare(status, lines, body, plan, now)
    meta = {now, max(now + plan.fresh_ms, 1), plan.keep_stale_ms}

    with {:ok, entry} <- encode(fn -> Entry.encode_response(response, entry_opts(meta, tags)) end) do
      if plan.vary == [],
        do: set(pages, base, entry),
        else: write_variant(pages, r, base, entry, plan.vary, meta)
    end
  end

  # A varying page: the response under its variant key, then the marker (kept as long as the longest variant).
  defp write_variant(pages, r, base, entry, vary, meta) do
    {generation, marker_meta} =
      case marker(pages, base) do
        {%{"vary" => ^vary, "generation" => g}, old} when is_binary(g) -> {g, later(old, meta)}
        _ -> {Base.encode16(:crypto.strong_rand_bytes(8), case: :lower), meta}
      end

    marker = %{"vary" => vary, "generation" => generation}
    key = Keys.variant_key(base, marker, r.headers)

    with {:ok, marker_entry} <-
           encode(fn ->
             Entry.encode(
               %Larder.Ordered{pairs: [{"vary", vary}, {"generation", generation}]},
               entry_opts(marker_meta, [])
             )
           end),
         {:ok, ^key} <- set(pages, key, entry),
         {:ok, _} <- set(pages, base, marker_entry) do
      {:ok, key}
    end
  end

  defp entry_opts({created, expires, stale}, tags),
    do: [compressor: :none, created_at: created, expires_at: expires, stale_ms: stale, tags: tags]

  defp later({_, e1, s1} = a, {_, e2, s2} = b),
    do: if(Header.hard_expiry(e1, s1) > Header.hard_expiry(e2, s2), do: a, else: b)

  defp encode(fun) do
    {:ok, fun.()}
  rescue
    e in ArgumentError -> {:error, {:invalid_entry, Exception.message(e)}}
  end

  defp set(pages, key, entry) do
    case Store.set(pages.store, key, entry) do
      :ok -> {:ok, key}
      {:ok, _} -> {:ok, key}
      {:error, _} = error -> error
    end
  end

  # The Vary marker a base key holds, with its header times, or nil.
  defp marker(pages, base) do
    with {:ok, raw} <- Store.get(pages.store, base),
         {:ok, %{kind: :value, value: %{"vary" => vary} = value} = e} <- Entry.decode(raw),
         true <- is_list(vary) and Enum.all?(vary, &is_binary/1) do
      {value, {e.created_at, e.expires_at, e.stale_ms}}
    else
      _ -> nil
    end
  end

  @doc """
  The stored response the front would find for `request` (fresh or stale): `{:ok, key, %Larder.Entry{}}` or
  `:miss` (a store failure or an entry that does not decode is a miss).
  """
  def find(%__MODULE__{} = pages, %Request{} = r) do
    with {:ok, base} <- key(pages, r),
         {:ok, raw} <- Store.get(pages.store, base),
         {:ok, e} <- Entry.decode(raw) do
      case e do
        %{kind: :response} ->
          {:ok, base, e}

        _ ->
          with {marker, _} <- marker(pages, base),
               key = Keys.variant_key(base, marker, r.headers),
               {:ok, raw} <- Store.get(pages.store, key),
               {:ok, %{kind: :response} = v} <- Entry.decode(raw) do
            {:ok, key, v}
          else
            _ -> :miss
          end
      end
    else
      _ -> :miss
    end
  end

  @doc "Removes every page tagged `tag` (Surrogate-Key, Cache-Tag), for every front reading the store."
  def purge_tag(%__MODULE__{} = pages, tag), do: Store.purge_tag(pages.store, tag)

  @doc "Removes the page for `GET url` (as clients request it through the front) and its alternate codings."
  def purge_url(%__MODULE__{} = pages, url) do
    with {:ok, base} <- Keys.url_key("GET", url, key_opts(pages)) do
      Enum.reduce_while(Keys.url_keys(base), {:ok, 0}, fn key, {:ok, n} ->
        case Store.delete(pages.store, key) do
          {:ok, true} -> {:cont, {:ok, n + 1}}
          {:ok, false} -> {:cont, {:ok, n}}
          {:error, _} = error -> {:halt, error}
        end
      end)
    end
  end

  # The response as the front stores it (stored.rs prepare), and its tags.
  defp prepare(status, lines, body, plan, now) do
    named =
      for {"connection", v} <- lines,
          option <- :binary.split(v, ",", [:global]),
          into: MapSet.new(),
          do: Date.lower(Date.trim(option))

    tags =
      lines
      |> Enum.flat_map(fn
        {"surrogate-key", v} -> String.split(v, [" ", "\t"], trim: true)
        {"cache-tag", v} -> v |> :binary.split(",", [:global]) |> Enum.map(&Date.trim/1)
        _ -> []
      end)
      |> Enum.reject(&(&1 == ""))
      |> Enum.uniq()
      |> Enum.sort()

    kept =
      Enum.reject(lines, fn {n, _} ->
        n in @hop_by_hop or n in named or n in @consumed or n in ["content-length", "age"]
      end)

    {encoding, kept} =
      case for({"content-encoding", v} <- kept, do: v) do
        [coding] ->
          coding = Date.lower(Date.trim(coding))

          if coding in Response.content_encodings(),
            do: {coding, Enum.reject(kept, &(elem(&1, 0) == "content-encoding"))},
            else: {"identity", kept}

        _ ->
          {"identity", kept}
      end

    kept = kept ++ [{"age", Integer.to_string(div(plan.initial_age_ms, 1000))}]

    kept =
      if List.keymember?(kept, "date", 0),
        do: kept,
        else: kept ++ [{"date", Date.format(now)}]

    {Response.new(status, kept, body, encoding), tags}
  end
end
