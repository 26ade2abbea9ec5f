defmodule Larder.Conformance.Storage do
  @moduledoc """
  storage.json (spec/HTTP.md §1) for `Larder.Conformance`: with each case's settings (the file's `rules_defaults`
  with the case's `rules`), `Larder.HTTPRules.storage/7` gives exactly the case's `expected`; and the file's shape
  (unique names, notes, known reasons, lowercase sorted Vary names) is a case of its own, `file-shape`, as in the
  Rust and Python runners.
  """

  alias Larder.{HTTPRules, Ordered}
  alias Larder.Conformance.Mismatch

  @reasons ~w(method status no-store request-no-store private authorization set-cookie vary-star no-explicit-freshness)

  @doc "`[{name, check}]`: `file-shape` first, then one per case."
  def cases(doc) do
    doc = Ordered.plain(doc)
    defaults = Map.fetch!(doc, "rules_defaults")

    [
      {"file-shape", fn -> shape(doc) end}
      | for(c <- Map.fetch!(doc, "cases"), do: {c["name"], fn -> check(defaults, c) end})
    ]
  end

  @doc "Elixir's outcome for a case, in the form of its `expected`."
  def decide(defaults, c) do
    overrides = c["rules"]

    for {name, _} <- overrides,
        not Map.has_key?(defaults, name),
        do: raise(Mismatch, "unknown rule #{name}")

    rules = HTTPRules.Rules.new(Map.merge(defaults, overrides))
    request = c["request"]
    response = c["response"]

    case HTTPRules.storage(
           rules,
           request["method"],
           pairs(request["headers"]),
           response["status"],
           pairs(response["headers"]),
           c["request_time_ms"],
           c["response_time_ms"]
         ) do
      {:not_stored, reason} ->
        %{"stored" => false, "reason" => reason}

      {:store, plan} ->
        %{
          "stored" => true,
          "fresh_ms" => plan.fresh_ms,
          "initial_age_ms" => plan.initial_age_ms,
          "keep_stale_ms" => plan.keep_stale_ms,
          "vary" => plan.vary
        }
    end
  end

  defp pairs(lines), do: for([name, value] <- lines, do: {name, value})

  defp check(defaults, c) do
    got = decide(defaults, c)

    unless got == c["expected"],
      do: raise(Mismatch, "expected #{inspect(c["expected"])}, got #{inspect(got)}")
  end

  defp shape(doc) do
    must(doc["schema"] == 1, "schema 1")

    Enum.reduce(doc["cases"], MapSet.new(), fn c, names ->
      name = c["name"]
      must(not MapSet.member?(names, name), "#{name} is not unique")
      must(is_binary(c["note"]) and c["note"] != "", "#{name} has no note")
      expected = c["expected"]

      case expected["stored"] do
        true ->
          must(
            Enum.sort(Map.keys(expected)) ==
              ~w(fresh_ms initial_age_ms keep_stale_ms stored vary),
            "#{name}: the fields of a stored outcome"
          )

          vary = expected["vary"]
          must(vary == vary |> Enum.uniq() |> Enum.sort(), "#{name}: vary is sorted and unique")
          must(Enum.all?(vary, &(&1 == String.downcase(&1))), "#{name}: vary is lowercase")

        false ->
          must(expected["reason"] in @reasons, "#{name}: unknown reason #{expected["reason"]}")

        _ ->
          raise Mismatch, "#{name}: stored is true or false"
      end

      MapSet.put(names, name)
    end)
  end

  defp must(true, _), do: :ok
  defp must(_, what), do: raise(Mismatch, what)
end
