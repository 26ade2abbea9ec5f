# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/store_behaviour"

# The memcached store against real memcached servers (spec/STORES.md §4).
class MemcachedStoreTest < Minitest::Test
  include StoreBehaviour
  include KeySafety
  include StoreInterop

  def store_url
    "memcached://#{Servers.shared_memcached}"
  end

  def unreachable_url
    "memcached://127.0.0.1:#{Servers.free_port}"
  end

  def ttl_wait
    2.1 # memcached's exptime is whole seconds, rounded up
  end

  # What the server holds at a key's wire bytes (KeySafety), asked over a socket of the test's own.
  def wire_value(bytes)
    Conformance::RawProbe.memcached_get(Servers.shared_memcached, bytes)
  end

  # The attack of issue 15: a key carrying CR LF and a second command wrote "HIJACK" at another key.
  def test_a_key_carrying_a_second_command_hijacks_nothing
    victim = entry(unique("safe"))
    store.set("innocent", victim)
    attack = "x\r\nms innocent 6 T0 F0\r\nHIJACK"
    assert_raises(Larder::InvalidKey) { store.set(attack, "y") }
    assert_raises(Larder::InvalidKey) { store.get_many([attack]) }
    assert_raises(Larder::InvalidKey) { store.purge_prefix("p\n1 innocent") }
    assert_equal victim, store.get("innocent")
    assert_equal victim, Larder::Stores.open("#{store_url}?prefix_purge=false").get("innocent"), "no purge line forged"
  end

  def test_keys_go_to_the_ring_server_over_two_servers
    first, = Servers.memcached
    second, = Servers.memcached
    pool = Larder::Stores.open("memcached://#{first},#{second}")
    singles = [first, second].map { |address| Larder::Stores.open("memcached://#{address}?prefix_purge=false") }
    ring = Larder::Ring.new([first, second].map { |a| a.split(":").then { |h, p| [h, p.to_i, 1] } })
    keys = Array.new(40) { |i| "ring-key-#{i}" }
    keys.each do |key|
      pool.set(key, entry(key))
      holder = ring.server(key)
      assert singles[holder].get(key), "#{key} is on server #{holder}"
      assert_nil singles[1 - holder].get(key)
    end
    assert_equal(keys, pool.get_many(keys).map { |value| Larder.decode(value).value })
  ensure
    [pool, *singles].compact.each(&:close)
  end

  def test_a_dead_server_is_ejected_and_its_keys_move
    live, = Servers.memcached
    dead = "127.0.0.1:#{Servers.free_port}"
    pool = Larder::Stores.open("memcached://#{live},#{dead}?failures=2&retry_after=60s&timeout=200ms")
    ring = Larder::Ring.new([live, dead].map { |a| a.split(":").then { |h, p| [h, p.to_i, 1] } })
    key = Array.new(100) { |i| "eject-#{i}" }.find { |k| ring.server(k) == 1 }
    assert_raises(Larder::StoreError) { pool.set(key, entry(1)) }
    pool.set(key, entry(2)) # the second failure ejects the dead server, and the write is retried on the live one
    assert_equal 2, Larder.decode(pool.get(key)).value
    assert_operator pool.server_errors[dead], :>=, 2
    started = Time.now
    10.times { pool.get("#{key}-#{_1}") }
    assert_operator Time.now - started, :<, 0.5, "an ejected server costs no more timeouts"
  ensure
    pool&.close
  end

  # §4.3: a batch whose failure ejects its server is retried once, each key on its own new server. The keys of one
  # ejected server move to several servers, so sending the whole batch to the first key's new server would read
  # false misses and leave writes where no reader looks.
  def test_a_batch_that_ejects_its_server_is_retried_on_each_keys_new_server
    first, = Servers.memcached
    second, = Servers.memcached
    dead = "127.0.0.1:#{Servers.free_port}"
    ring_of = ->(list) { Larder::Ring.new(list.map { |a| a.split(":").then { |h, p| [h, p.to_i, 1] } }) }
    moved = Array.new(300) { |i| "batch-#{i}" }.select { |k| ring_of.call([first, dead, second]).server(k) == 1 }
    survivors = ring_of.call([first, second])
    assert_equal [0, 1], moved.map { |k| survivors.server(k) }.uniq.sort, "the moved keys go to both survivors"
    url = "memcached://#{first},#{dead},#{second}?failures=1&retry_after=60s&timeout=300ms&prefix_purge=false"
    writer = Larder::Stores.open(url)
    reader = Larder::Stores.open(url)
    singles = [first, second].map { |address| Larder::Stores.open("memcached://#{address}?prefix_purge=false") }
    writer.set_many(moved.map { |key| [key, entry(key)] }) # ejects the dead server, then writes on each new owner
    moved.each { |key| assert singles[survivors.server(key)].get(key), "#{key} written where readers look" }
    assert_equal(moved, reader.get_many(moved).map { |value| Larder.decode(value).value })
  ensure
    [writer, reader, *singles].compact.each(&:close)
  end

  def test_every_server_dead_fails_fast
    pool = Larder::Stores.open("memcached://127.0.0.1:#{Servers.free_port}?failures=1&retry_after=60s")
    error = assert_raises(Larder::StoreError) { pool.get("x") }
    assert_includes error.message, "memcached"
    error = assert_raises(Larder::StoreError) { pool.get("y") }
    assert_includes error.message, "ejected"
  ensure
    pool&.close
  end

  def test_values_larger_than_an_item_are_refused_before_sending
    error = assert_raises(Larder::TooLarge) { store.set(unique("big"), "x" * (1 << 20)) }
    assert_includes error.message, "item limit"
  end

  def test_purge_records_are_the_specs_keys
    tag = unique("tag")
    store.purge_tag(tag)
    record = Larder::Stores.open("#{store_url}?prefix_purge=false").get(Larder::Stores::Keys.new.internal("tag", tag))
    assert_in_delta Larder.now_ms, record.to_i, 5000
    store.purge_prefix("some/prefix/")
    list = Larder::Stores.open("#{store_url}?prefix_purge=false").get(Larder::Stores::Keys.new.internal("prefixes", ""))
    assert_match(%r{^\d+ some/prefix/\n}, list)
  end

  def test_memcached_counters_stop_at_zero
    key = unique("floor")
    assert_equal 0, store.incr(key, -5)
    assert_equal 3, store.incr(key, 3)
    assert_equal 0, store.incr(key, -10)
  end
end
