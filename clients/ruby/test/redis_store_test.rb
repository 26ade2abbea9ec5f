# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/store_behaviour"
require "redis" # the gem, to look at what the store wrote from outside

# The Redis store against a real redis-server (spec/STORES.md §5).
class RedisStoreTest < Minitest::Test
  include StoreBehaviour
  include KeySafety
  include StoreInterop

  def store_url
    "redis://#{Servers.redis}/0"
  end

  def unreachable_url
    "redis://127.0.0.1:#{Servers.free_port}/0"
  end

  # What the server holds at a key's wire bytes (KeySafety), asked over a socket of the test's own.
  def wire_value(bytes)
    Conformance::RawProbe.redis(Servers.redis, "GET", bytes)
  end

  def test_entries_carry_their_expiry_and_tag_sets
    key = unique("pxat")
    data = entry("v", ttl_ms: 60_000, stale_ms: 5_000, tags: ["t1"])
    store.set(key, data)
    raw = ::Redis.new(url: "redis://#{Servers.redis}/0")
    expected = Larder.decode(data).expires_at + 5_000
    assert_equal expected, raw.call("PEXPIRETIME", key)
    set_key = Larder::Stores::Keys.new.internal("tag", "t1")
    assert_includes raw.smembers(set_key), key
    assert_operator raw.call("PEXPIRETIME", set_key), :>=, expected
  ensure
    raw&.close
  end

  def test_the_database_in_the_url_is_selected
    one = Larder::Stores.open("redis://#{Servers.redis}/1")
    key = unique("db1")
    one.set(key, entry("in db 1"))
    assert_nil store.get(key)
    assert_equal "in db 1", Larder.decode(one.get(key)).value
  ensure
    one&.close
  end

  def test_a_dead_server_fails_fast_after_its_failures
    dead = Larder::Stores.open("redis://127.0.0.1:#{Servers.free_port}/0?failures=2&retry_after=60s")
    2.times { assert_raises(Larder::StoreError) { dead.get("x") } }
    error = assert_raises(Larder::StoreError) { dead.get("x") }
    assert_includes error.message, "ejected"
    assert_equal 3, dead.server_errors.values.first
  ensure
    dead&.close
  end
end

# The same behaviour on a real three-master Redis Cluster.
class RedisClusterStoreTest < Minitest::Test
  include StoreBehaviour
  include KeySafety
  include StoreInterop

  def store_url
    "redis+cluster://#{Servers.redis_cluster.join(',')}"
  end

  def unreachable_url
    "redis+cluster://127.0.0.1:#{Servers.free_port}"
  end

  # What the master of a key's wire bytes holds there (KeySafety): each master is asked; the others answer MOVED.
  def wire_value(bytes)
    Servers.redis_cluster.each do |address|
      return Conformance::RawProbe.redis(address, "GET", bytes)
    rescue RuntimeError => e
      raise unless e.message.include?("MOVED")
    end
    flunk "no master serves #{bytes.inspect}"
  end

  def test_keys_spread_over_every_master
    keys = Array.new(30) { |i| unique("spread-#{i}") }
    keys.each { |key| store.set(key, entry(key)) }
    counts = Servers.redis_cluster.map do |address|
      node = ::Redis.new(url: "redis://#{address}")
      keys.count { |key| node.exists?(key) rescue false } # rubocop:disable Style/RescueModifier
    ensure
      node&.close
    end
    assert_equal 30, counts.sum
    assert(counts.all?(&:positive?), "every master holds some keys: #{counts}")
  end
end
