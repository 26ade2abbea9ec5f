# Larder.HTTPRules against hostile responses (storage.json, run by vectors_test.exs, says what the rules are): any
# bytes in any header give a decision, never an exception, and numbers of any length are read without bignums.
# Seeded: `mix test --seed N` replays a run.
defmodule Larder.HTTPRulesTest do
  use ExUnit.Case, async: true

  alias Larder.HTTPRules
  alias Larder.HTTPRules.{Date, Rules}

  @t 1_700_000_000_000
  @names ~w(cache-control cdn-cache-control surrogate-control expires date age vary content-encoding etag
            last-modified set-cookie)

  defp decide(headers, request \\ []),
    do: HTTPRules.storage(%Rules{}, "GET", request, 200, headers, @t, @t)

  test "a run of a million digits is 2^31 seconds, read at once" do
    digits = String.duplicate("9", 1_000_000)

    for field <- ["cache-control", "surrogate-control"] do
      assert {:store, plan} = decide([{field, "max-age=" <> digits}])
      assert plan.fresh_ms == 2_147_483_648_000
    end

    # Structured fields cap an Integer at 15 digits: the field is invalid, Cache-Control governs.
    assert {:not_stored, "no-explicit-freshness"} =
             decide([{"cdn-cache-control", "max-age=" <> digits}])

    assert {:store, %{initial_age_ms: 2_147_483_648_000}} =
             decide([{"age", digits}, {"cache-control", "max-age=60"}])
  end

  test "random bytes in every header give a decision, never an exception" do
    seed = ExUnit.configuration()[:seed]
    :rand.seed(:exsss, {seed, 7, 11})

    for _ <- 1..3_000 do
      headers =
        for _ <- 1..:rand.uniform(5) do
          {Enum.random(@names), random_value()}
        end

      request = if :rand.uniform(4) == 1, do: [{"authorization", random_value()}], else: []

      case decide(headers, request) do
        {:store, %HTTPRules.Plan{fresh_ms: f, keep_stale_ms: k, vary: vary}} ->
          assert f >= 0 and k >= 0 and (f > 0 or k > 0)
          assert vary == Enum.sort(Enum.uniq(vary))

        {:not_stored, reason} ->
          assert is_binary(reason)
      end
    end
  end

  test "dates: the three forms, names in any case, and nothing lenient" do
    assert Date.parse("Tue, 14 Nov 2023 22:13:20 GMT", @t) == @t
    assert Date.parse(" tUE, 14 nov 2023 22:13:20 gmt\t", @t) == @t
    assert Date.parse("Tuesday, 14-Nov-23 22:13:20 GMT", @t) == @t
    assert Date.parse("Tue Nov 14 22:13:20 2023", @t) == @t
    assert Date.format(@t) == "Tue, 14 Nov 2023 22:13:20 GMT"

    for bad <- [
          "0",
          "",
          "Tue, 14 Nov 2023 22:13:20 UTC",
          "Tue, 14 Nov 23 22:13:20 GMT",
          <<0xFF, 0xFE>>,
          "Tue, 14 Nov 2023 24:13:20 GMT",
          "Tue, 00 Nov 2023 22:13:20 GMT"
        ],
        do: assert(Date.parse(bad, @t) == nil, bad)
  end

  test "settings are checked" do
    assert %Rules{stale_if_error_secs: 5, targeted_fields: ["x-cdn"]} =
             Rules.new(stale_if_error_secs: 5, targeted_fields: ["X-CDN"])

    assert_raise ArgumentError, fn -> Rules.new(stale_if_error_secs: -1) end
    assert_raise ArgumentError, fn -> Rules.new(nonsense: 1) end
    assert_raise ArgumentError, fn -> Rules.new(cache_set_cookie: "yes") end
  end

  defp random_value do
    pieces = [
      "max-age=",
      "s-maxage",
      "=",
      ",",
      "\"",
      "\\",
      ";",
      " ",
      "\t",
      "?1",
      "(",
      ")",
      ":",
      "no-store",
      "private",
      "public",
      "60",
      "-1",
      "1.5",
      "*",
      "gzip",
      "Tue, 14 Nov 2023 22:13:20 GMT"
    ]

    for _ <- 1..:rand.uniform(8), into: "" do
      if :rand.uniform(3) == 1,
        do: :rand.bytes(:rand.uniform(4)),
        else: Enum.random(pieces)
    end
  end
end
