# frozen_string_literal: true

require_relative "test_helper"
require "time"
require "larder/rack/cache_rules"

# Larder::Rack::CacheRules through its Ruby API (every case of spec/vectors/storage.json runs in vectors_test.rb):
# header lines in any case, the settings as options, the opt-in refusals, and the readers' edges the vectors leave
# out.
class CacheRulesTest < Minitest::Test
  NOW = 1_700_000_000_000

  def plan(pairs, status: 200, authorization: false, rules: Larder::Rack::CacheRules.new)
    rules.storage("GET", authorization ? [["Authorization", ""]] : [], status, pairs, NOW, NOW)
  end

  def fresh(pairs, **options)
    result, reason = plan(pairs, **options)
    result ? result.fresh_ms : reason
  end

  def test_explicit_freshness_and_prohibitions
    assert_equal 60_000, fresh([["cache-control", "max-age=60"]])
    assert_equal 5000, fresh([["cache-control", "max-age=60, s-maxage=5"]])
    assert_equal "no-store", fresh([["cache-control", "max-age=60, no-store"]])
    assert_equal "private", fresh([["cache-control", "max-age=60, private"]])
    assert_equal "private", fresh([["cache-control", "max-age=0, private, must-revalidate"]]), "Rails' default"
    assert_equal "no-explicit-freshness", fresh([["content-type", "text/html"]])
    assert_equal "set-cookie", fresh([["cache-control", "max-age=60"], ["set-cookie", "a=1"]])
    assert_equal "vary-star", fresh([["cache-control", "max-age=60"], ["vary", "Accept, *"]])
    assert_equal "status", fresh([["cache-control", "max-age=60"]], status: 206)
    assert_equal "authorization", fresh([["cache-control", "max-age=60"]], authorization: true)
    assert_equal 60_000, fresh([["cache-control", "max-age=60, public"]], authorization: true)
  end

  def test_first_directive_wins_and_bad_values_are_stale
    assert_equal 60_000, fresh([["cache-control", "max-age=60"], ["cache-control", "max-age=600"]])
    assert_equal 0, fresh([["cache-control", "max-age=abc"]]), "stale at once, kept for stale-if-error"
    assert_equal "no-explicit-freshness",
                 fresh([["cache-control", "max-age=abc"]], rules: Larder::Rack::CacheRules.new(stale_if_error: 0))
    assert_equal "no-explicit-freshness", fresh([["cache-control", "max-age =60"]])
    assert_equal 60_000, fresh([["cache-control", 'max-age="60"']])
    assert_equal 60_000, fresh([["cache-control", 'foo="a,no-store", max-age=60']]), "commas in quotes do not split"
  end

  def test_targeted_fields_then_surrogate_control_then_cache_control
    assert_equal 600_000, fresh([%w[cache-control private], ["cdn-cache-control", "max-age=600"]])
    assert_equal "no-store", fresh([["cache-control", "max-age=60"], %w[cdn-cache-control no-store]])
    assert_equal 60_000, fresh([["cache-control", "max-age=60"], ["cdn-cache-control", "max-age=6.5"]]),
                 "an invalid CDN-Cache-Control is ignored"
    assert_equal 60_000, fresh([["cache-control", "max-age=60"], ["cdn-cache-control", "max-age=600;"]])
    assert_equal 30_000, fresh([["cache-control", "max-age=60"], ["surrogate-control", "max-age=30"]])
    assert_equal 600_000, fresh([["surrogate-control", "max-age=30"], ["cdn-cache-control", "max-age=600"]])
    expires = Time.at((NOW + 100_000) / 1000).httpdate
    assert_equal 100_000, fresh([["date", Time.at(NOW / 1000).httpdate], ["expires", expires]])
    assert_equal "no-explicit-freshness",
                 fresh([%w[cdn-cache-control public], ["expires", expires]]), "Expires does not count under it"
  end

  def test_age_and_stale_windows
    result, = plan([["cache-control", "max-age=60"], %w[age 20]])
    assert_equal [40_000, 20_000, 300_000], [result.fresh_ms, result.initial_age_ms, result.keep_stale_ms],
                 "stale-if-error 300 s by default, as larder serve"
    result, = plan([["cache-control", "max-age=60, stale-while-revalidate=900"]])
    assert_equal 900_000, result.keep_stale_ms
    result, = plan([["cache-control", "max-age=60, must-revalidate"]])
    assert_equal 0, result.keep_stale_ms
    result, = plan([["cache-control", "max-age=60, must-revalidate"], ["etag", '"x"']])
    assert_equal 3_600_000, result.keep_stale_ms, "validators keep it for revalidation"
    result, = plan([%w[cache-control no-cache], ["etag", '"x"']])
    assert_equal [0, 3_600_000], [result.fresh_ms, result.keep_stale_ms]
    result, = plan([["cache-control", "max-age=60"]], rules: Larder::Rack::CacheRules.new(stale_if_error: 0))
    assert_equal 0, result.keep_stale_ms
  end

  def test_vary
    result, = plan([["cache-control", "max-age=60"], ["vary", "Accept-Encoding, Accept"], %w[vary accept]])
    assert_equal ["accept"], result.vary, "accept-encoding is dropped for a coding every reader can decode"
    result, = plan([["cache-control", "max-age=60"], %w[vary Accept-Encoding], %w[content-encoding deflate]])
    assert_equal ["accept-encoding"], result.vary
  end

  def test_header_names_in_any_case_and_request_directives_only_when_honoured
    response = [["Cache-Control", "max-age=60"], %w[VARY Accept-Language]]
    request = [%w[CACHE-CONTROL no-store], %w[Authorization x]]
    plan, = Larder::Rack::CacheRules.new.storage("GET", request[0, 1], 200, response, NOW, NOW)
    assert_equal [60_000, ["accept-language"]], [plan.fresh_ms, plan.vary], "ignored by default, as the front"
    honouring = Larder::Rack::CacheRules.new(honor_request_cache_control: true)
    assert_equal [nil, "request-no-store"], honouring.storage("GET", request, 200, response, NOW, NOW)
    assert_equal [nil, "authorization"], Larder::Rack::CacheRules.new.storage("GET", request, 200, response, NOW, NOW)
  end

  def test_heuristic_freshness_only_with_heuristic_max
    last_modified = Time.at((NOW - 10_000_000) / 1000).httpdate
    pairs = [["date", Time.at(NOW / 1000).httpdate], ["last-modified", last_modified]]
    assert_equal 0, fresh(pairs), "off by default: kept for revalidation only"
    assert_equal 1_000_000, fresh(pairs, rules: Larder::Rack::CacheRules.new(heuristic_max: 3600)), "10% of its age"
    assert_equal 60_000, fresh(pairs, rules: Larder::Rack::CacheRules.new(heuristic_max: 60)), "capped"
  end

  def test_what_every_opted_in_response_is_still_refused
    rules = Larder::Rack::CacheRules.new
    assert_nil rules.refusal("GET", 200, [%w[Cache-Control private]]), "directives do not apply to an opt-in"
    assert_equal "method", rules.refusal("HEAD", 200, [])
    [101, 206, 304, 600, 999].each { |status| assert_equal "status", rules.refusal("GET", status, []), status }
    assert_equal "set-cookie", rules.refusal("GET", 200, [%w[Set-Cookie a=1]])
    assert_nil Larder::Rack::CacheRules.new(cache_set_cookie: true).refusal("GET", 200, [%w[Set-Cookie a=1]])
    assert_equal "vary-star", rules.refusal("GET", 200, [["Vary", "Accept, *"]])
  end

  # A byte sequence is not a String (no field-name list): a no-cache of that type invalidates the targeted field.
  def test_a_targeted_no_cache_must_be_true_or_a_string
    cc = ["cache-control", "max-age=60"]
    assert_equal 0, fresh([cc, ["cdn-cache-control", 'no-cache="set-cookie", max-age=600'], ["etag", '"x"']])
    assert_equal 60_000, fresh([cc, ["cdn-cache-control", "no-cache=:YWJj:, max-age=600"]])
    assert_equal 60_000, fresh([cc, ["cdn-cache-control", "no-cache=abc, max-age=600"]]), "a token is not a String"
    assert_equal 600_000, fresh([cc, ["cdn-cache-control", "max-age=600, foo=(1 \"a\" :YWJj:);p=?0"]])
    assert_equal 60_000, fresh([cc, ["cdn-cache-control", "max-age=600, foo=(1\"a\")"]]), "items need a space"
  end

  def test_http_dates_as_spec_http_reads_them
    now2026 = Time.utc(2026, 11, 24).to_i * 1000
    parse = ->(text, now = now2026) { Larder::Rack::HttpDate.parse_ms(text, now_ms: now) }
    assert_equal Time.utc(2076, 8, 18).to_i * 1000, parse.call("Tuesday, 18-Aug-76 00:00:00 GMT"), "50 years ahead"
    assert_equal Time.utc(1977, 8, 18).to_i * 1000, parse.call("Thursday, 18-Aug-77 00:00:00 GMT")
    assert_nil parse.call("Thursday, 18-Aug-49 00:00:00 GMT", Time.utc(1990, 1, 1).to_i * 1000), "1949 < 1970"
    assert_equal 784_111_777_000, parse.call("  sun NOV  6 08:49:37 1994\t")
    assert_equal 784_111_777_000, parse.call("Thu, 06 nov 1994 08:49:37 gmt"), "weekday not checked"
    ["Sun, 06 Nov 1994 08:49:37 GMT\n", "Sun, 06 Nov 1969 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
     "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC"].each { |bad| assert_nil parse.call(bad), bad }
  end
end
