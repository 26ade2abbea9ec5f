# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/page_front"
require "open3"

# The 003 page cache for real: a Rails 6.1 app on WEBrick writes its pages into memcached through
# Larder::Rack::PageCache, and `larder serve --store memcached://…` in front answers them without reaching Ruby (the
# app counts its requests). Needs ruby-railties and ruby-actionpack.
class PageCacheRailsTest < Minitest::Test
  def self.front
    @front ||= PageFront.new
  end

  def front
    self.class.front
  end

  def test_the_first_request_renders_in_rails_and_every_later_one_is_answered_by_larder
    before = front.app_requests
    first = front.get("/opt/1")
    assert_equal "200", first.code
    assert_includes first.body, "Catalogue page 1"
    assert_equal before + 1, front.app_requests
    5.times do
      again = front.get("/opt/1")
      assert_equal "200", again.code
      assert_equal first.body, again.body, "the stored page, not a new rendering"
      assert_match(/HIT/, again["x-cache"])
    end
    assert_equal before + 1, front.app_requests, "no later request reached Ruby"
  end

  def test_a_page_rendered_by_rails_alone_is_served_by_the_front_under_the_same_key
    before = front.app_requests
    # Straight to Rails, as the front would ask (its Host), and never through the front.
    direct = front.get("/products/7", direct: true, headers: { "Host" => front.front_authority })
    assert_equal "200", direct.code
    assert_equal before + 1, front.app_requests
    served = front.get("/products/7")
    assert_equal direct.body, served.body
    assert_match(/HIT/, served["x-cache"])
    assert_nil served["surrogate-key"], "the front consumes Surrogate-Key"
    # The app's `expires_in 60, public: true`, in whatever words this Rails writes it, passed on as Rails sent it.
    assert_equal %w[max-age=60 public], directives(direct["cache-control"])
    assert_equal direct["cache-control"], served["cache-control"]
    assert_equal before + 1, front.app_requests
  end

  def test_the_entry_is_a_larder_response_under_the_fronts_key
    direct, sent = front.exchange("/products/8", direct: true,
                                                 headers: { "Host" => front.front_authority, "Accept" => "*/*" })
    assert_equal "200", direct.code
    store = Larder::Stores.open(front.store_url)
    base = Larder::Keys.url_key("GET", "http://#{front.front_authority}/products/8")
    key = entry_key(store, base, direct, sent)
    entry = Larder.decode(store.get(key))
    assert_equal "response", entry.kind
    assert_equal 200, entry.value.status
    assert_equal %w[product:8 products], entry.tags
    assert_includes entry.value.body, "Catalogue page 8"
    assert_nil(%w[content-length surrogate-key].find { |name| entry.value.header(name) })
    assert_in_delta 60_000, entry.expires_at - entry.created_at, 5000
    # The front's rule (spec/HTTP.md §1.7): the default stale-if-error of 300 s, raised to the revalidation window of
    # an hour when the response has a validator (Rails adds an ETag to such a page today; whether it does is Rails').
    validator = entry.value.header("etag") || entry.value.header("last-modified")
    assert_equal validator ? 3_600_000 : 300_000, entry.stale_ms, "validator: #{validator.inspect}"
    assert_equal "200 #{direct['content-type']} True\n", python_reads(key)
  ensure
    store&.close
  end

  # Where the page Rails wrote is, checked on the way: under the base key when the response had no (effective) Vary,
  # else under the variant key the front computes, below a marker naming what the app's Vary names, normalised as the
  # front normalises them, and selected by the values of the headers that request actually carried.
  def entry_key(store, base, direct, sent)
    vary = front_vary(direct.get_fields("vary").to_a, direct.get_fields("content-encoding").to_a)
    return base if vary.empty?

    marker = Larder.decode(store.get(base))
    assert_equal "value", marker.kind, "a marker at the base key: Rails sent Vary: #{direct.get_fields('vary')}"
    assert_equal vary, marker.value["vary"], "the Vary Rails sent: #{direct.get_fields('vary')}"
    Larder::Keys.variant_key(base, marker.value, sent)
  end

  # spec/HTTP.md §1.7, written out here rather than taken from the client: every line split at ",", trimmed, empty
  # names dropped, lowercased, sorted by byte value, deduplicated; accept-encoding dropped when the body has no coding
  # or exactly one that every reader decodes.
  def front_vary(lines, codings)
    names = lines.flat_map { |line| line.split(",") }.map { |name| name.strip.downcase }.reject(&:empty?).uniq.sort
    decodable = codings.empty? || (codings.size == 1 && %w[identity gzip br zstd].include?(codings[0].strip.downcase))
    decodable ? names - ["accept-encoding"] : names
  end

  # A Cache-Control value's directives, lowercase and sorted.
  def directives(value)
    value.to_s.split(",").map { |directive| directive.strip.downcase }.reject(&:empty?).sort
  end

  # The page as the Python client reads it from the same memcached.
  def python_reads(key)
    python = File.join(TestPaths::REPO, ".venv", "bin", "python")
    raise "#{python} is missing: run `make test` from the repository root" unless File.executable?(python)

    code = "import sys, larder; r = larder.decode(larder.open_store(sys.argv[1]).get(sys.argv[2])).value; " \
           "print(r.status, r.header('content-type').decode(), b'Catalogue page 8' in r.body)"
    out, err, status = Open3.capture3(python, "-c", code, front.store_url, key)
    assert status.success?, err
    out
  end

  def test_variants_by_accept_language
    before = front.app_requests
    french = { "Accept-Language" => "fr-FR" }
    english = { "Accept-Language" => "en" }
    assert_equal "bonjour\n", front.get("/greeting", headers: french).body
    assert_equal "hello\n", front.get("/greeting", headers: english).body
    assert_equal before + 2, front.app_requests
    3.times do
      assert_equal "bonjour\n", front.get("/greeting", headers: french).body
      assert_equal "hello\n", front.get("/greeting", headers: english).body
    end
    assert_equal before + 2, front.app_requests
  end

  def test_a_response_that_sets_a_cookie_is_never_stored
    before = front.app_requests
    3.times { assert_equal "200", front.get("/cookie").code }
    assert_equal before + 3, front.app_requests
  end

  def test_purging_a_tag_from_ruby_removes_the_page_for_the_front
    first = front.get("/opt/3")
    assert_match(/HIT/, front.get("/opt/3")["x-cache"])
    before = front.app_requests
    Larder.purge(tag: "page:3", store: Larder::Stores.open(front.store_url))
    after = front.get("/opt/3")
    assert_equal before + 1, front.app_requests, "rendered again after the purge"
    refute_equal first.body, after.body
  end
end
