# frozen_string_literal: true

require "open3"
require "larder/cache"
require_relative "key_safety"

# The behaviour every store shares (spec/STORES.md §2-§3), included by each store's test class, which defines
# `store_url` (a fresh, empty store's URL for each test) and may override `ttl_wait` (how long past a 1 s TTL a
# value may survive: memcached rounds up to whole seconds). Interop runs the Rust binary on the same URL.
module StoreBehaviour
  def store
    @store ||= Larder::Stores.open(store_url)
  end

  def teardown
    @store&.close
    super
  end

  def ttl_wait
    1.2
  end

  def entry(value, **options)
    Larder.encode(value, created_at: Larder.now_ms, **options)
  end

  def unique(name)
    "#{name}-#{object_id}-#{rand(1 << 30)}"
  end

  def rust_store(*args, stdin: "")
    out, err, status = Open3.capture3(TestPaths.rust_bin, "store", *args, "--store", rust_store_url, stdin_data: stdin,
                                                                                                     binmode: true)
    [status.exitstatus, out.b, err]
  end

  # The store's URL for the Rust binary: on a network store with a timeout that a loaded machine does not outlast
  # (the default 250 ms made a purge fail now and then while the whole suite ran).
  def rust_store_url
    return store_url unless store_url.start_with?("memcached://", "redis://") && !store_url.include?("timeout=")

    "#{store_url}#{store_url.include?('?') ? '&' : '?'}timeout=5s"
  end

  def test_set_get_and_miss
    key = unique("k")
    data = entry({ "id" => 7 })
    assert_nil store.get(key)
    store.set(key, data)
    assert_equal data, store.get(key)
  end

  def test_get_many_keeps_order_and_misses
    keys = Array.new(5) { |i| unique("m#{i}") }
    keys.each_with_index { |key, i| store.set(key, entry(i)) if i.even? }
    found = store.get_many(keys)
    assert_equal([0, nil, 2, nil, 4], found.map { |value| value && Larder.decode(value).value })
  end

  def test_set_many
    items = Array.new(4) { |i| [unique("s#{i}"), entry("v#{i}")] }.to_h
    store.set_many(items)
    assert_equal items.values, store.get_many(items.keys)
  end

  def test_add_only_when_absent
    key = unique("a")
    assert store.add(key, entry(1))
    refute store.add(key, entry(2))
    assert_equal 1, Larder.decode(store.get(key)).value
  end

  def test_an_entry_past_its_hard_expiry_is_not_stored
    key = unique("expired")
    old = Larder.encode("x", created_at: Larder.now_ms - 10_000, ttl_ms: 1000, stale_ms: 1000)
    store.set(key, entry("fresh"))
    store.set(key, old)
    assert_nil store.get(key), "set of an expired entry removes the older value"
    refute store.add(key, old)
    assert_nil store.get(key)
  end

  def test_ttl_expires_values
    key = unique("ttl")
    store.set(key, entry("short"), ttl: 1)
    assert store.get(key)
    sleep ttl_wait
    assert_nil store.get(key)
  end

  def test_delete_and_delete_if
    key = unique("d")
    refute store.delete(key)
    token = Larder::Stores::Base.token
    assert_match(/\A[0-9a-f]{16}\z/, token)
    assert store.add(key, token, ttl: 30)
    refute store.delete_if(key, "0000000000000000")
    assert_equal token, store.get(key)
    assert store.delete_if(key, token)
    assert_nil store.get(key)
    store.set(key, entry(1))
    assert store.delete(key)
    assert_equal 0, store.delete_many([key])
  end

  def test_counters
    key = unique("c")
    assert_nil store.incr(key, 5, create: false)
    assert_nil store.get(key)
    assert_equal 5, store.incr(key, 5)
    assert_equal 7, store.incr(key, 2)
    assert_equal 4, store.incr(key, -3)
    assert_equal "4", store.get(key)
    other = unique("notcounter")
    data = entry("text")
    store.set(other, data)
    assert_raises(Larder::NotACounter) { store.incr(other, 1) }
    assert_equal data, store.get(other)
  end

  def test_purge_tag_and_prefix
    tagged = unique("t1")
    untagged = unique("t2")
    red, blue, green = %w[red blue green].map { |tag| unique(tag) } # a purge on a shared server touches its own
    store.set(tagged, entry(1, tags: [red, blue]))
    store.set(untagged, entry(2, tags: [green]))
    sleep 0.01
    store.purge_tag(blue)
    assert_nil store.get(tagged)
    assert store.get(untagged)
    base = unique("pfx")
    store.set("#{base}/a", entry(1))
    store.set("#{base}/b", entry(2))
    store.set("other-#{base}", entry(3))
    sleep 0.01
    store.purge_prefix("#{base}/")
    assert_nil store.get("#{base}/a")
    assert_nil store.get("#{base}/b")
    assert store.get("other-#{base}")
  end

  def test_prefix_option_separates_applications
    separator = store_url.include?("?") ? "&" : "?"
    one = Larder::Stores.open("#{store_url}#{separator}prefix=app1:")
    two = Larder::Stores.open("#{store_url}#{separator}prefix=app2:")
    key = unique("shared")
    one.set(key, entry("one"))
    assert_nil two.get(key)
    assert_equal "one", Larder.decode(one.get(key)).value
    assert_equal "one", Larder.decode(store.get("app1:#{key}")).value
  ensure
    one&.close
    two&.close
  end

  def test_unknown_option_is_an_error_naming_it
    separator = store_url.include?("?") ? "&" : "?"
    error = assert_raises(Larder::UrlError) { Larder::Stores.open("#{store_url}#{separator}bogus=1") }
    assert_includes error.message, "bogus"
  end
end

# Interop with the Rust binary on the same store URL, for the stores processes share (all but memory).
module StoreInterop
  def test_interop_with_the_rust_binary
    key = unique("interop")
    lang = unique("lang")
    data = entry({ "from" => "ruby", "n" => [1, 2, 3] }, tags: [lang], ttl_ms: 60_000)
    store.set(key, data)
    status, out, err = rust_store("get", key)
    assert_equal 0, status, err
    assert_equal data, out
    rust_key = unique("from-rust")
    rust_entry = Open3.capture2(TestPaths.rust_bin, "encode", "--ttl", "60", "--tag", lang,
                                stdin_data: '{"from":"rust"}', binmode: true).first
    status, _, err = rust_store("set", rust_key, stdin: rust_entry)
    assert_equal 0, status, err
    assert_equal({ "from" => "rust" }, Larder.decode(store.get(rust_key)).value)
    status, _, err = rust_store("purge", "--tag", lang)
    assert_equal 0, status, err
    sleep 0.01
    assert_nil store.get(key), "a purge by the Rust binary reaches what Ruby wrote"
    assert_nil store.get(rust_key)
  end
end
