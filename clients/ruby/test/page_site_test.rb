# frozen_string_literal: true

require_relative "test_helper"
require "stringio"

# Issue 32, finding 7 (spec/HTTP.md §2): a request that reaches the app directly, not through larder's front, with a
# hostile Host or forwarding field must not write a page the front then serves for another site. Each request here
# is one of the issue's (or a relative) through Larder::Rack::PageCache with its `site:` and `trusted_proxies:`
# options: it is keyed on the site the rules allow, or not stored (reason `host`).
class PageSiteTest < Minitest::Test
  UNTRUSTED = "203.0.113.9"
  PROXY = "10.0.0.7"
  NOT_PLAIN = ["victim.example/admin", "evil@victim.example", "evil.example/x@victim.example", "victim.example:99999",
               "victim.example:", "victim.example:+80", "victim.example%2fadmin", "victim.example\\admin",
               "victim.example?x", "victim.example#x", "victim .example", "victim.example,evil.example", "[::1",
               "[::1]x", "[]", "", "v\u00efctim.example"].freeze

  def middleware(**options)
    store = Larder::Stores.open("memory://")
    app = ->(_env) { [200, { "Content-Type" => "text/plain", "Cache-Control" => "max-age=60" }, ["page"]] }
    [Larder::Rack::PageCache.new(app, store: store, **options), store]
  end

  def call(cache, host, peer: UNTRUSTED, request_uri: nil, server: nil, **headers)
    env = { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => "/p", "QUERY_STRING" => "",
            "SERVER_NAME" => "victim.example", "SERVER_PORT" => "80", "REMOTE_ADDR" => peer,
            "rack.url_scheme" => "http", "rack.errors" => StringIO.new }
    env["HTTP_HOST"] = host if host
    env["REQUEST_URI"] = request_uri if request_uri
    env["SERVER_SOFTWARE"] = server if server
    headers.each { |name, value| env["HTTP_#{name.to_s.upcase}"] = value }
    cache.call(env)
  end

  def keys(store)
    store.instance_variable_get(:@items).keys.sort
  end

  def test_a_host_that_is_not_a_plain_authority_stores_nothing
    NOT_PLAIN.each do |host|
      cache, store = middleware
      call(cache, host)
      assert_empty keys(store), "#{host.inspect} wrote a page"
      assert_equal({ "host" => 1 }, cache.not_stored, host.inspect)
      refute Larder::Rack::PageSite.plain_authority?(host), host.inspect
    end
    cache, store = middleware
    call(cache, nil)
    assert_empty keys(store), "no Host: SERVER_NAME does not stand in"
  end

  def test_forwarding_fields_count_only_from_trusted_proxies
    cache, store = middleware(trusted_proxies: ["10.0.0.0/8"])
    call(cache, "victim.example", x_forwarded_host: "evil.example", x_forwarded_proto: "https")
    call(cache, "victim.example", forwarded: "host=evil.example;proto=https")
    assert_equal ["GET:http://victim.example/p"], keys(store), "an untrusted peer's forwarding fields are ignored"
    call(cache, "victim.example", peer: PROXY, x_forwarded_host: "shop.example", x_forwarded_proto: "https")
    assert_includes keys(store), "GET:https://shop.example/p", "a trusted proxy's claims key the page"
    call(cache, "victim.example", peer: "::ffff:10.0.0.7", x_forwarded_host: "mapped.example")
    assert_includes keys(store), "GET:http://mapped.example/p", "an IPv4-mapped peer is its IPv4 address"
    before = keys(store)
    [{ x_forwarded_host: "a.example", forwarded: "host=b.example" }, { x_forwarded_proto: "gopher" },
     { x_forwarded_host: "evil@victim.example" }, { x_forwarded_host: "victim.example/admin" }].each do |claims|
      call(cache, "victim.example", peer: PROXY, **claims)
      assert_equal before, keys(store), claims.inspect
    end
    assert_equal 4, cache.not_stored["host"]
  end

  def test_a_configured_site_is_the_only_one_stored
    cache, store = middleware(site: "Shop.Example")
    call(cache, "other.example")
    call(cache, "shop.example:8080")
    assert_empty keys(store)
    call(cache, "SHOP.example:80")
    assert_equal ["GET:http://shop.example/p"], keys(store)
    assert_raises(ArgumentError) { middleware(site: "evil@shop.example") }
    assert_raises(ArgumentError) { middleware(trusted_proxies: ["10.0.0.0/99"]) }
    assert_raises(ArgumentError) { middleware(trusted_proxies: "10.0.0.0/8") }
  end

  # spec/HTTP.md §2 step 2: an absolute-form target is not stored, even when it names the Host (RFC 9112 §3.2.2 tells
  # the app to use the target's authority, which a direct sender chooses).
  def test_an_absolute_target_is_never_stored
    cache, store = middleware
    call(cache, "victim.example", request_uri: "http://evil.example/p")
    call(cache, "victim.example", request_uri: "http://user@victim.example/p")
    call(cache, "victim.example", request_uri: "http://VICTIM.example:80/p")
    assert_empty keys(store)
    assert_equal({ "host" => 3 }, cache.not_stored)
    call(cache, "victim.example", request_uri: "/p")
    assert_equal ["GET:http://victim.example/p"], keys(store), "an origin-form target is"
  end

  # WEBrick rebuilds REQUEST_URI as an absolute URL from the Host for every request: there a target naming the Host
  # is stored under it, and one naming another authority is not.
  def test_under_webrick_an_absolute_target_is_keyed_only_when_it_names_the_host
    cache, store = middleware
    webrick = { server: "WEBrick/1.8.1 (Ruby/3.1.2/2022-04-12)" }
    call(cache, "victim.example", request_uri: "http://evil.example/p", **webrick)
    call(cache, "victim.example", request_uri: "http://user@victim.example/p", **webrick)
    assert_empty keys(store)
    call(cache, "victim.example", request_uri: "http://VICTIM.example:80/p", **webrick)
    assert_equal ["GET:http://victim.example/p"], keys(store)
  end

  # The `scheme:` option keys every page on it, whatever the connection or a trusted proxy says.
  def test_the_scheme_option_wins
    cache, store = middleware(scheme: "https", trusted_proxies: ["10.0.0.0/8"])
    call(cache, "shop.example")
    call(cache, "other.example", peer: PROXY, x_forwarded_proto: "http")
    assert_equal ["GET:https://other.example/p", "GET:https://shop.example/p"], keys(store)
    assert_raises(ArgumentError) { middleware(scheme: "gopher") }
  end
end
