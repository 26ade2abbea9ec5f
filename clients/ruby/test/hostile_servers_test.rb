# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/hostile"
require "larder/cache"
require "active_support/cache/larder_store"

# Stores against servers whose replies are hostile (spec/STORES.md §2, "Replies are hostile too" and "Whole
# reply"): for memcached, Redis and a Redis Cluster seed, and each of larder-hostile's behaviours, every operation
# fails with the store's own error within the timeout and a small margin, taking far less memory than the reply
# announces, and Larder::Cache and LarderStore read a miss. (Before, a 1 GiB bulk took Ruby to 5.2 GB, nested
# replies raised SystemStackError out of Cache and LarderStore, and memcached blocked over 40 s on an endless line;
# memcached's get read two of the wide reply's values and answered them as found.)
class HostileServersTest < Minitest::Test
  TIMEOUT_MS = 300
  # What a failed call may take beyond its timeout on a shared 2-core machine (a child process, scheduling).
  MARGIN = 1.0
  # Far below every announced size (1 GiB, or a line of 1 GiB), above what a process's allocator may take anyway.
  MEMORY_BOUND = 32 << 20

  # larder-hostile's arguments per behaviour: `wide` is a whole reply past every bound, each value within its own
  # (memcached: 10,000 values of 512 KiB, each within max_item; Redis: 1,000 strings of 64 MiB, each within
  # max_value, in one array).
  WIDE = { "memcached" => %w[--count 10000 --size 524288], "redis" => %w[--count 1000 --size 67108864] }.freeze
  BEHAVIOURS = {
    "memcached" => %w[drip huge endless-line garbage silent wide],
    "redis" => %w[drip huge nested endless-line garbage silent wide],
    "redis+cluster" => %w[drip huge nested endless-line garbage silent wide]
  }.freeze

  # Every operation of a store, on safe keys.
  OPERATIONS = {
    get: ->(store) { store.get("k") },
    get_many: ->(store) { store.get_many(%w[a b c]) },
    set: ->(store) { store.set("k", Larder.encode("v")) },
    set_many: ->(store) { store.set_many({ "a" => Larder.encode("v"), "b" => Larder.encode("w") }) },
    add: ->(store) { store.add("k", Larder.encode("v")) },
    incr: ->(store) { store.incr("k", 1) },
    delete: ->(store) { store.delete("k") },
    delete_many: ->(store) { store.delete_many(%w[a b]) },
    delete_if: ->(store) { store.delete_if("k", Larder.encode("v")) },
    purge_tag: ->(store) { store.purge_tag("t") },
    purge_prefix: ->(store) { store.purge_prefix("k") },
    clear: ->(store) { store.clear }
  }.freeze

  def self.server_args(protocol, behaviour)
    behaviour == "wide" ? WIDE.fetch(protocol) : []
  end

  def url(scheme, address, options = "")
    "#{scheme}://#{address}#{scheme == 'redis' ? '/0' : ''}?timeout=#{TIMEOUT_MS}ms&failures=1000#{options}"
  end

  BEHAVIOURS.each do |scheme, behaviours|
    protocol = scheme.start_with?("redis") ? "redis" : "memcached"
    behaviours.each do |behaviour|
      define_method("test_#{scheme.tr('+', '_')}_#{behaviour.tr('-', '_')}_fails_in_time_and_bounds") do
        Hostile.serve(protocol, behaviour, *HostileServersTest.server_args(protocol, behaviour)) do |address|
          OPERATIONS.each do |operation, call|
            outcome = Hostile.measure do
              store = Larder::Stores.open(url(scheme, address))
              call.call(store)
              "returned"
            rescue Larder::StoreError => e
              { "error" => e.class.name, "message" => e.message }
            end
            what = "#{scheme} #{behaviour} #{operation}"
            assert_equal({ "error" => "Larder::StoreError" }, outcome["result"].slice("error"),
                         "#{what}: #{outcome['result']}")
            assert_operator outcome["seconds"], :<, (TIMEOUT_MS / 1000.0) + MARGIN, what
            assert_operator outcome["growth"], :<, MEMORY_BOUND, what
          end
        end
      end

      define_method("test_#{scheme.tr('+', '_')}_#{behaviour.tr('-', '_')}_is_a_miss_for_the_cache_and_rails") do
        Hostile.serve(protocol, behaviour, *HostileServersTest.server_args(protocol, behaviour)) do |address|
          outcome = Hostile.measure do
            cache = Larder::Cache.new(url(scheme, address), namespace: "app")
            rails = ActiveSupport::Cache::LarderStore.new(url(scheme, address), namespace: "app")
            { "cache_read" => cache.read("k"), "cache_multi" => cache.read_multi("a", "b"),
              "cache_write" => cache.write("k", 1), "rails_read" => rails.read("k"),
              "rails_multi" => rails.read_multi("a", "b"), "rails_write" => rails.write("k", 1),
              "store_errors" => cache.stats[:store_errors] }
          end
          expected = { "cache_read" => nil, "cache_multi" => {}, "cache_write" => false, "rails_read" => nil,
                       "rails_multi" => {}, "rails_write" => false, "store_errors" => 3 }
          assert_equal expected, outcome["result"], "#{scheme} #{behaviour}"
          assert_operator outcome["seconds"], :<, (6 * TIMEOUT_MS / 1000.0) + (2 * MARGIN)
          assert_operator outcome["growth"], :<, MEMORY_BOUND
        end
      end
    end
  end

  # Issue 32, finding 4 (spec/STORES.md §2, "Whole reply"): 1,000 strings of 64 MiB, each within max_value, in one
  # array, to the counter's script (and to GET and MGET) are refused at the reply's first line, with a timeout long
  # enough to read a gigabyte: at once, and with little memory.
  def test_a_wide_redis_reply_is_refused_at_its_first_line
    Hostile.serve("redis", "wide", *WIDE.fetch("redis")) do |address|
      { incr: OPERATIONS[:incr], get: OPERATIONS[:get], get_many: OPERATIONS[:get_many] }.each do |operation, call|
        outcome = Hostile.measure do
          store = Larder::Stores.open("redis://#{address}/0?timeout=20s&failures=1000")
          call.call(store)
          "returned"
        rescue Larder::StoreError => e
          { "error" => e.class.name, "message" => e.message }
        end
        assert_equal "Larder::StoreError", outcome["result"]["error"], "#{operation}: #{outcome['result']}"
        assert_includes outcome["result"]["message"], "more elements than the command can produce", operation.to_s
        assert_operator outcome["seconds"], :<, 0.5, operation.to_s
        assert_operator outcome["growth"], :<, 8 << 20, operation.to_s
      end
    end
  end

  # A memcached that answers a request with more replies than it asked (values after a get's) is out of step: the
  # MN after the request's replies is missing, which fails the request, though each value is within max_item.
  def test_a_memcached_answering_more_than_asked_fails_at_the_first_reply_too_many
    Hostile.serve("memcached", "wide", *WIDE.fetch("memcached")) do |address|
      %i[get get_many].each do |operation|
        outcome = Hostile.measure do
          store = Larder::Stores.open("memcached://#{address}?timeout=20s&failures=1000")
          OPERATIONS[operation].call(store)
          "returned"
        rescue Larder::StoreError => e
          { "error" => e.class.name, "message" => e.message }
        end
        assert_equal "Larder::StoreError", outcome["result"]["error"], "#{operation}: #{outcome['result']}"
        assert_includes outcome["result"]["message"], "where MN ends the replies", operation.to_s
        assert_operator outcome["seconds"], :<, 0.5, operation.to_s
        assert_operator outcome["growth"], :<, 16 << 20, operation.to_s
      end
    end
  end

  def test_a_bad_reply_is_a_failure_that_ejects_the_server
    Hostile.serve("memcached", "garbage") do |address|
      store = Larder::Stores.open("memcached://#{address}?timeout=#{TIMEOUT_MS}ms&failures=2&retry_after=60s")
      2.times { assert_raises(Larder::StoreError) { store.get("k") } }
      assert_equal 2, store.server_errors[address]
      error = assert_raises(Larder::StoreError) { store.get("k") }
      assert_includes error.message, "every server is ejected", "refused without asking the server"
    ensure
      store&.close
    end
  end

  def test_a_redis_reply_too_large_for_max_value_is_refused_when_announced
    Hostile.serve("redis", "huge", "--size", (2 << 20).to_s) do |address|
      small = Larder::Stores.open("redis://#{address}/0?max_value=1M&timeout=2s")
      error = assert_raises(Larder::StoreError) { small.get("k") }
      assert_includes error.message, "max_value"
      large = Larder::Stores.open("redis://#{address}/0?max_value=4M&timeout=2s")
      assert_equal 2 << 20, large.get("k").bytesize, "a value within max_value is read"
    ensure
      small&.close
      large&.close
    end
  end

  # A connection whose reply was bad is out of step: it is closed, and the next request opens another; a connection
  # whose reply was good is kept. (A few lines of fake memcached: the real one never answers badly.)
  def test_the_connection_of_a_bad_reply_is_closed_and_a_good_one_kept
    server = TCPServer.new("127.0.0.1", 0)
    replies = Queue.new
    ["EN\r\n", "EN\r\n", "XX not a reply\r\n", "EN\r\n"].each { |reply| replies << reply }
    accepted = Queue.new
    acceptor = Thread.new do
      loop do
        client = server.accept
        accepted << client
        Thread.new(client) { |c| while (line = c.gets) do c.write(line == "mn\r\n" ? "MN\r\n" : replies.pop) end }
      end
    end
    store = Larder::Stores.open("memcached://127.0.0.1:#{server.addr[1]}?prefix_purge=false&failures=100&timeout=2s")
    2.times { assert_nil store.get("k") }
    assert_equal 1, accepted.size, "a good reply keeps its connection"
    assert_raises(Larder::StoreError) { store.get("k") }
    assert_nil store.get("k")
    assert_equal 2, accepted.size, "the bad reply's connection was closed"
  ensure
    store&.close
    acceptor&.kill
    server&.close
  end
end
