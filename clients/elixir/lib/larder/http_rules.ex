defmodule Larder.HTTPRules do
  @moduledoc """
  Whether larder, a shared cache, stores a response and for how long: the storage rules of spec/HTTP.md §1, which
  `larder serve` applies, so that an app writing its own pages into a shared store (`Larder.Pages`) stores exactly
  what the front would have stored, with the same freshness and stale window. spec/vectors/storage.json is the
  contract (`Larder.Conformance` runs every case). The same module as Python's `larder.http_rules` and Go's
  `httprules`.

  `storage/7` makes the checks of §1.2 in their order, so the reason for not storing is the one every
  implementation reports. Header lines are `{name, value}` pairs of binaries in message order, duplicates kept,
  names in any case. Nothing here does I/O.
  """

  alias Larder.HTTPRules.{Date, Directives}

  # Statuses whose caching larder implements in full (for `must-understand`, spec/HTTP.md §1.9).
  @understood [200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 451, 501]
  # Statuses a cache may give heuristic freshness (RFC 9110 §15.1); with a validator, storable without freshness.
  @heuristically_cacheable [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 451, 501]
  @known_codings Larder.Response.content_encodings()

  defmodule Rules do
    @moduledoc """
    The settings of `larder serve`'s storage rules (spec/HTTP.md §1.8) with its defaults: set them as the front is
    set. Durations are whole seconds; the names are the front's configuration keys.
    """
    defstruct targeted_fields: ["cdn-cache-control"],
              surrogate_control: true,
              heuristic_max_secs: 0,
              cache_set_cookie: false,
              stale_while_revalidate_secs: 0,
              stale_if_error_secs: 300,
              revalidation_window_secs: 3600,
              honor_request_cache_control: false

    @type t :: %__MODULE__{}

    @doc "Rules from a keyword list or map of settings; raises ArgumentError for an unknown or ill-typed one."
    def new(settings \\ []) do
      Enum.reduce(settings, %__MODULE__{}, fn {name, value}, rules ->
        name = if is_binary(name), do: String.to_existing_atom(name), else: name

        unless Map.has_key?(rules, name) and name != :__struct__,
          do: raise(ArgumentError, "unknown storage rule #{inspect(name)}")

        %{rules | name => check(name, value)}
      end)
    end

    defp check(:targeted_fields, names) when is_list(names) do
      unless Enum.all?(names, &is_binary/1),
        do: raise(ArgumentError, "targeted_fields is a list of field names")

      Enum.map(names, &Date.lower/1)
    end

    defp check(name, v)
         when name in [:surrogate_control, :cache_set_cookie, :honor_request_cache_control] and
                is_boolean(v),
         do: v

    defp check(name, v)
         when name in [
                :heuristic_max_secs,
                :stale_while_revalidate_secs,
                :stale_if_error_secs,
                :revalidation_window_secs
              ] and is_integer(v) and v >= 0,
         do: v

    defp check(name, v), do: raise(ArgumentError, "#{name} cannot be #{inspect(v)}")
  end

  defmodule Plan do
    @moduledoc """
    How a storable response is stored (spec/HTTP.md §1.1): `expires_at` = response time + `fresh_ms`, `stale_ms` =
    `keep_stale_ms`; `vary` the request headers it varies on (lowercase, sorted, unique), `accept-encoding` left
    out when larder can decode the body's coding.
    """
    defstruct [:fresh_ms, :initial_age_ms, :keep_stale_ms, vary: []]
  end

  @doc """
  Whether and how larder stores this response to this request (spec/HTTP.md §1.2, in its order): `{:store,
  %Plan{}}` or `{:not_stored, reason}` with reason the `Cache-Status` detail (`"method"`, `"status"`,
  `"request-no-store"`, `"no-store"`, `"private"`, `"authorization"`, `"set-cookie"`, `"vary-star"`,
  `"no-explicit-freshness"`).
  """
  def storage(
        %Rules{} = rules,
        method,
        request,
        status,
        response,
        request_time_ms,
        response_time_ms
      ) do
    request = lowercase(request)
    response = lowercase(response)
    {d, use_expires} = governing(rules, response)

    cond do
      method != "GET" ->
        {:not_stored, "method"}

      status < 200 or status >= 600 or status in [206, 304] ->
        {:not_stored, "status"}

      rules.honor_request_cache_control and
          Directives.cache_control(values(request, "cache-control")).no_store ->
        {:not_stored, "request-no-store"}

      d.must_understand and status not in @understood ->
        {:not_stored, "status"}

      not d.must_understand and d.no_store ->
        {:not_stored, "no-store"}

      d.private ->
        {:not_stored, "private"}

      values(request, "authorization") != [] and
          not (d.public or d.must_revalidate or d.s_maxage != nil) ->
        {:not_stored, "authorization"}

      values(response, "set-cookie") != [] and not rules.cache_set_cookie ->
        {:not_stored, "set-cookie"}

      vary_names(response) == :star ->
        {:not_stored, "vary-star"}

      true ->
        freshness(rules, status, response, d, use_expires, request_time_ms, response_time_ms)
    end
  end

  defp freshness(rules, status, response, d, use_expires, request_time_ms, response_time_ms) do
    vary = vary_names(response)
    vary = if coding_decodable?(response), do: vary -- ["accept-encoding"], else: vary
    validator? = values(response, "etag") != [] or values(response, "last-modified") != []

    lifetime =
      case lifetime_ms(rules, status, response, d, use_expires, response_time_ms) do
        nil -> if validator? and (status in @heuristically_cacheable or d.public), do: 0
        ms -> ms
      end

    if lifetime == nil do
      {:not_stored, "no-explicit-freshness"}
    else
      initial_age = initial_age_ms(response, request_time_ms, response_time_ms)
      fresh = if d.no_cache, do: 0, else: max(lifetime - initial_age, 0)
      keep = stale_window_ms(rules, d)
      keep = if validator?, do: max(keep, rules.revalidation_window_secs * 1000), else: keep

      if fresh == 0 and keep == 0,
        do: {:not_stored, "no-explicit-freshness"},
        else:
          {:store,
           %Plan{fresh_ms: fresh, initial_age_ms: initial_age, keep_stale_ms: keep, vary: vary}}
    end
  end

  @doc """
  The directives that govern larder (spec/HTTP.md §1.3), and whether `Expires` counts: the first valid, non-empty
  targeted field, else Surrogate-Control when it says something larder acts on, else Cache-Control.
  """
  def governing(%Rules{} = rules, response) do
    response = lowercase(response)

    targeted = Enum.find_value(rules.targeted_fields, &Directives.targeted(values(response, &1)))

    surrogate =
      rules.surrogate_control &&
        Directives.surrogate_control(values(response, "surrogate-control"))

    cond do
      targeted -> {targeted, false}
      surrogate -> {surrogate, false}
      true -> {Directives.cache_control(values(response, "cache-control")), true}
    end
  end

  @doc "The lowercase names a response varies on (sorted by byte value, unique), or `:star` for `Vary: *`."
  def vary_names(response) do
    names =
      for line <- values(lowercase(response), "vary"),
          name <- :binary.split(line, ",", [:global]),
          name = Date.trim(name),
          name != "",
          do: Date.lower(name)

    if "*" in names, do: :star, else: names |> Enum.uniq() |> Enum.sort()
  end

  @doc "No `Content-Encoding`, or exactly one line naming a coding larder decodes (any case)."
  def coding_decodable?(response) do
    case values(lowercase(response), "content-encoding") do
      [] -> true
      [coding] -> Date.lower(Date.trim(coding)) in @known_codings
      _ -> false
    end
  end

  # The freshness lifetime (spec/HTTP.md §1.5), or nil when the response gives none.
  defp lifetime_ms(rules, status, response, d, use_expires, now_ms) do
    expires = values(response, "expires")

    cond do
      d.s_maxage != nil ->
        d.s_maxage * 1000

      d.max_age != nil ->
        d.max_age * 1000

      use_expires and expires != [] ->
        # Several Expires lines, or one that is not an HTTP-date, mean "already expired" (RFC 9111 §5.3).
        case expires do
          [one] ->
            case Date.parse(one, now_ms) do
              nil ->
                0

              at ->
                min(max(at - date_or(response, now_ms), 0), Directives.max_delta_seconds() * 1000)
            end

          _ ->
            0
        end

      rules.heuristic_max_secs > 0 and (status in @heuristically_cacheable or d.public) ->
        case first_date(response, "last-modified", now_ms) do
          nil ->
            nil

          last_modified ->
            age = max(date_or(response, now_ms) - last_modified, 0)
            min(div(age, 10), rules.heuristic_max_secs * 1000)
        end

      true ->
        nil
    end
  end

  # How long past freshness the response may be served stale (spec/HTTP.md §1.7), before validators.
  defp stale_window_ms(rules, d) do
    if d.must_revalidate or d.proxy_revalidate or d.no_cache or d.s_maxage != nil do
      0
    else
      swr = d.stale_while_revalidate || rules.stale_while_revalidate_secs
      sie = d.stale_if_error || rules.stale_if_error_secs
      max(swr, sie) * 1000
    end
  end

  # RFC 9111 §4.2.3's corrected initial age.
  defp initial_age_ms(response, request_time_ms, response_time_ms) do
    apparent =
      case first_date(response, "date", response_time_ms) do
        nil -> 0
        date -> max(response_time_ms - date, 0)
      end

    delay = max(response_time_ms - request_time_ms, 0)

    age =
      case values(response, "age") do
        [first | _] ->
          [element | _] = :binary.split(first, ",")
          Directives.delta_seconds(Date.trim(element)) || 0

        [] ->
          0
      end

    max(apparent, age * 1000 + delay)
  end

  defp first_date(response, name, now_ms) do
    case values(response, name) do
      [first | _] -> Date.parse(first, now_ms)
      [] -> nil
    end
  end

  # `Date`, or the response time when it is absent or invalid (RFC 9110 §6.6.1).
  defp date_or(response, response_time_ms),
    do: first_date(response, "date", response_time_ms) || response_time_ms

  @doc false
  def lowercase(headers), do: for({name, value} <- headers, do: {Date.lower(name), value})

  # Every line of field `name` (lowercase), in order; `headers` already lowercased.
  defp values(headers, name), do: for({^name, value} <- headers, do: value)
end
