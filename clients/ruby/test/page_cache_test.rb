# frozen_string_literal: true

require_relative "test_helper"
require "stringio"

# Larder::Rack::PageCache and CacheRules without servers: which responses are stored, for how long, and in what
# form (the rules of crates/proxy/src/rfc9111 and stored.rs). The end-to-end test with Rails and the Rust front is
# page_cache_rails_test.rb.
class CacheRulesTest < Minitest::Test
  NOW = 1_700_000_000_000

  def plan(pairs, status: 200, authorization: false, rules: Larder::Rack::CacheRules.new)
    rules.storage("GET", authorization, status, pairs, NOW, NOW)
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
    assert_equal [40_000, 20_000, 300_000], [result.fresh_ms, result.initial_age_ms, result.stale_ms],
                 "stale-if-error 300 s by default, as larder serve"
    result, = plan([["cache-control", "max-age=60, stale-while-revalidate=900"]])
    assert_equal 900_000, result.stale_ms
    result, = plan([["cache-control", "max-age=60, must-revalidate"]])
    assert_equal 0, result.stale_ms
    result, = plan([["cache-control", "max-age=60, must-revalidate"], ["etag", '"x"']])
    assert_equal 3_600_000, result.stale_ms, "validators keep it for revalidation"
    result, = plan([%w[cache-control no-cache], ["etag", '"x"']])
    assert_equal [0, 3_600_000], [result.fresh_ms, result.stale_ms]
    result, = plan([["cache-control", "max-age=60"]], rules: Larder::Rack::CacheRules.new(stale_if_error: 0))
    assert_equal 0, result.stale_ms
  end

  def test_vary
    result, = plan([["cache-control", "max-age=60"], ["vary", "Accept-Encoding, Accept"], %w[vary accept]])
    assert_equal ["accept"], result.vary, "accept-encoding is dropped for a coding every reader can decode"
    result, = plan([["cache-control", "max-age=60"], %w[vary Accept-Encoding], %w[content-encoding deflate]])
    assert_equal ["accept-encoding"], result.vary
  end
end

class PageCacheTest < Minitest::Test
  def env(path = "/p?b=2&a=1&utm_source=x", method: "GET", headers: {})
    path_info, query = path.split("?", 2)
    { "REQUEST_METHOD" => method, "SCRIPT_NAME" => "", "PATH_INFO" => path_info, "QUERY_STRING" => query.to_s,
      "HTTP_HOST" => "Shop.Example:80", "rack.errors" => StringIO.new }.merge(headers)
  end

  def cache(headers, body: ["<h1>hi</h1>"], status: 200, store: Larder::Stores.open("memory://"), **options)
    app = ->(_env) { [status, headers, body] }
    [Larder::Rack::PageCache.new(app, store: store, **options), store]
  end

  def test_a_storable_response_is_written_under_the_fronts_key
    middleware, store = cache({ "Content-Type" => "text/html", "Cache-Control" => "public, max-age=60",
                                "Surrogate-Key" => "b a", "Cache-Tag" => "c, a", "Content-Length" => "11",
                                "Connection" => "close, X-Hop", "X-Hop" => "1", "Set-Cookie2" => "kept" })
    status, _headers, body = middleware.call(env)
    assert_equal [200, "<h1>hi</h1>"], [status, body.each.to_a.join]
    entry = Larder.decode(store.get("GET:http://shop.example/p?a=1&b=2"))
    assert_equal %w[a b c], entry.tags
    names = entry.value.headers.map(&:first)
    assert_equal %w[content-type cache-control set-cookie2 age date], names
    assert_equal "0", entry.value.header("age")
    assert_equal 60_000, entry.expires_at - entry.created_at
    assert_equal "none", entry.compressor, "stored uncompressed, as the front stores pages"
  end

  def test_namespace_scheme_and_drop
    middleware, store = cache({ "Cache-Control" => "max-age=60" }, namespace: "www", drop: ["b"])
    middleware.call(env(headers: { "HTTP_X_FORWARDED_PROTO" => "https", "HTTP_HOST" => "shop.example:443" }))
    refute_nil store.get("www:GET:https://shop.example/p?a=1&utm_source=x")
  end

  def test_a_known_coding_moves_into_the_entry
    middleware, store = cache({ "Cache-Control" => "max-age=60", "Content-Encoding" => "gzip",
                                "Vary" => "Accept-Encoding" }, body: [Zlib.gzip("hello")])
    middleware.call(env("/"))
    entry = Larder.decode(store.get("GET:http://shop.example/"))
    assert_equal "response", entry.kind, "no marker: accept-encoding does not select a variant"
    assert_equal "gzip", entry.value.content_encoding
    assert_nil entry.value.header("content-encoding")
  end

  def test_what_is_not_stored
    [[{ "Cache-Control" => "private, max-age=60" }, {}], [{ "Cache-Control" => "max-age=60" }, { method: "HEAD" }],
     [{ "Cache-Control" => "max-age=60" }, { method: "POST" }],
     [{ "Cache-Control" => "max-age=60", "Set-Cookie" => "a=1" }, {}]].each do |headers, request|
      middleware, store = cache(headers)
      middleware.call(env("/", **request))
      assert_nil store.get("GET:http://shop.example/"), [headers, request].inspect
    end
    middleware, store = cache({ "Cache-Control" => "max-age=60" }, body: ["x" * 20], max_body: 10)
    assert_equal "x" * 20, middleware.call(env("/"))[2].each.to_a.join
    assert_nil store.get("GET:http://shop.example/")
  end

  def test_an_explicit_opt_in_stores_a_private_response
    middleware, store = cache({ "Cache-Control" => "max-age=0, private, must-revalidate" })
    middleware.call(env("/", headers: { "larder.page_cache" => { expires_in: 30, stale: 5, tags: ["t"] } }))
    entry = Larder.decode(store.get("GET:http://shop.example/"))
    assert_equal [30_000, 5000, ["t"]], [entry.expires_at - entry.created_at, entry.stale_ms, entry.tags]
    assert_equal "max-age=0, private, must-revalidate", entry.value.header("cache-control")
    middleware, store = cache({ "Set-Cookie" => "a=1" })
    middleware.call(env("/", headers: { "larder.page_cache" => { expires_in: 30 } }))
    assert_nil store.get("GET:http://shop.example/"), "never a cookie for everyone, even opted in"
  end

  def test_variants_share_a_marker_generation
    middleware, store = cache({ "Cache-Control" => "max-age=60", "Vary" => "Accept-Language" })
    middleware.call(env("/", headers: { "HTTP_ACCEPT_LANGUAGE" => "fr" }))
    generation = Larder.decode(store.get("GET:http://shop.example/")).value["generation"]
    middleware.call(env("/"))
    marker = Larder.decode(store.get("GET:http://shop.example/")).value
    assert_equal({ "vary" => ["accept-language"], "generation" => generation }, marker)
    base = "GET:http://shop.example/"
    refute_nil store.get(Larder::Keys.variant_key(base, marker, [%w[accept-language fr]]))
    refute_nil store.get(Larder::Keys.variant_key(base, marker, []))
  end

  def test_a_store_error_never_fails_the_request
    errors = []
    middleware, = cache({ "Cache-Control" => "max-age=60" }, store: Larder::Stores.open("memcached://127.0.0.1:1"),
                                                             on_error: ->(e) { errors << e })
    status, _, body = middleware.call(env("/"))
    assert_equal [200, "<h1>hi</h1>"], [status, body.each.to_a.join]
    assert_kind_of Larder::StoreError, errors.first
  end
end
