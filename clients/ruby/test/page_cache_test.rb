# frozen_string_literal: true

require_relative "test_helper"
require "stringio"
require "time"

# Larder::Rack::PageCache without servers: which responses are stored, for how long, and in what form (the rules of
# crates/proxy/src/stored.rs; the storage rules themselves are cache_rules_test.rb and spec/vectors/storage.json). The
# end-to-end test with Rails and the Rust front is page_cache_rails_test.rb.
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
    before = Larder.now_ms
    status, _headers, body = middleware.call(env)
    took = Larder.now_ms - before
    assert_equal [200, "<h1>hi</h1>"], [status, body.each.to_a.join]
    entry = Larder.decode(store.get("GET:http://shop.example/p?a=1&b=2"))
    assert_equal %w[a b c], entry.tags
    names = entry.value.headers.map(&:first)
    assert_equal %w[content-type cache-control set-cookie2 age date], names
    assert_equal "0", entry.value.header("age")
    # max-age less the response's age (RFC 9111 §4.2.3): the time the app took to answer counts, so up to `took`.
    assert_includes (60_000 - took)..60_000, entry.expires_at - entry.created_at
    assert_equal "none", entry.compressor, "stored uncompressed, as the front stores pages"
  end

  def test_namespace_scheme_and_drop
    middleware, store = cache({ "Cache-Control" => "max-age=60" }, namespace: "www", drop: ["b"],
                                                                   trusted_proxies: ["10.0.0.0/8"])
    middleware.call(env(headers: { "HTTP_X_FORWARDED_PROTO" => "https", "HTTP_HOST" => "shop.example:443",
                                   "REMOTE_ADDR" => "10.0.0.7" }))
    refute_nil store.get("www:GET:https://shop.example/p?a=1&utm_source=x"), "a trusted proxy (the front) says https"
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

  def test_the_fronts_request_and_heuristic_settings
    middleware, store = cache({ "Cache-Control" => "max-age=60" })
    middleware.call(env("/", headers: { "HTTP_CACHE_CONTROL" => "no-store" }))
    refute_nil store.get("GET:http://shop.example/"), "request directives are ignored by default, as by the front"
    middleware, store = cache({ "Cache-Control" => "max-age=60" }, honor_request_cache_control: true)
    middleware.call(env("/", headers: { "HTTP_CACHE_CONTROL" => "no-store" }))
    assert_nil store.get("GET:http://shop.example/")
    last_modified = Time.at(Time.now.to_i - 86_400).httpdate
    middleware, store = cache({ "Last-Modified" => last_modified }, heuristic_max: 60)
    middleware.call(env("/"))
    entry = Larder.decode(store.get("GET:http://shop.example/"))
    assert_in_delta 60_000, entry.expires_at - entry.created_at, 2000, "10% of a day, capped at 60 s"
  end

  def test_a_variant_is_selected_by_the_request_as_the_app_saw_it
    middleware, store = cache({ "Cache-Control" => "max-age=60", "Vary" => "accept-language, X-Device" })
    middleware.call(env("/", headers: { "HTTP_ACCEPT_LANGUAGE" => "fr,  de", "HTTP_X_DEVICE" => "" }))
    base = "GET:http://shop.example/"
    marker = Larder.decode(store.get(base)).value
    assert_equal %w[accept-language x-device], marker["vary"]
    request = [%w[Accept-Language fr], ["X-Device", ""], %w[ACCEPT-LANGUAGE de]]
    refute_nil store.get(Larder::Keys.variant_key(base, marker, request)), "the front's lines give the same key"
    assert_nil store.get(Larder::Keys.variant_key(base, marker, [["Accept-Language", "fr, de"]])), "absent != empty"
  end

  def test_a_coding_in_upper_case_moves_into_the_entry_too
    middleware, store = cache({ "Cache-Control" => "max-age=60", "Content-Encoding" => "GZIP",
                                "Vary" => "Accept-Encoding" }, body: [Zlib.gzip("hello")])
    middleware.call(env("/"))
    entry = Larder.decode(store.get("GET:http://shop.example/"))
    assert_equal ["response", "gzip", nil], [entry.kind, entry.value.content_encoding,
                                             entry.value.header("content-encoding")]
  end
end
