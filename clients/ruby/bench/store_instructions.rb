# frozen_string_literal: true

# One store, one operation, N times, for counting the client's instructions with callgrind (issue 18 target 2: the
# load on a shared machine moves wall-clock ratios by more than the 10% in question; instruction counts do not move).
# Run it with N and with 0 and divide the difference by N; servers are given by port (started by the caller).
#
#   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
#     ruby clients/ruby/bench/store_instructions.rb MEMCACHED_PORT REDIS_PORT STORE OP N
#
# STORE: larder-mc, dalli, larder-redis, redis, larder-memory, memory. OP: read, write, fetch, multi (read_multi of
# 100 keys), none. SIZE (default 1024): the value's bytes (a String of "x"); or VALUE, one of bench/values.rb's values
# ("query 64K", "document 5K", …). LIB: another client's lib directory (an older checkout). The stores' timeouts are
# 5 s: valgrind runs Ruby ~50x slower.
$LOAD_PATH.unshift ENV.fetch("LIB") { File.expand_path("../lib", __dir__) }
require_relative "values"
require "active_support"
require "active_support/cache"
require "active_support/cache/mem_cache_store"
require "active_support/cache/redis_cache_store"
require "active_support/cache/memory_store"
require "active_support/cache/larder_store"

memcached, redis, which, operation, count = ARGV
abort "usage: store_instructions.rb MEMCACHED_PORT REDIS_PORT STORE OP N" unless count
count = Integer(count)
cache = case which
        when "larder-mc" then ActiveSupport::Cache::LarderStore.new("memcached://127.0.0.1:#{memcached}?timeout=5s")
        when "dalli" then ActiveSupport::Cache::MemCacheStore.new("127.0.0.1:#{memcached}", socket_timeout: 5)
        when "larder-redis" then ActiveSupport::Cache::LarderStore.new("redis://127.0.0.1:#{redis}/0?timeout=5s")
        when "redis"
          ActiveSupport::Cache::RedisCacheStore.new(url: "redis://127.0.0.1:#{redis}/0", read_timeout: 5,
                                                    write_timeout: 5)
        when "larder-memory" then ActiveSupport::Cache::LarderStore.new("memory://")
        when "memory" then ActiveSupport::Cache::MemoryStore.new
        else abort "unknown store #{which}"
        end
value = ENV["VALUE"] ? BenchValues.all.fetch(ENV["VALUE"]) : "x" * Integer(ENV.fetch("SIZE", "1024"))
keys = Array.new(Integer(ENV.fetch("KEYS", "100"))) { |i| "#{which}k#{i}" } # KEYS=1: less setup for large values
keys.each { |key| cache.write(key, value) }
# Every path warmed up once, so that the N runs count only the operations.
cache.read(keys[0])
cache.fetch(keys[0]) { raise "a miss" }
cache.read_multi(*keys)
cache.write(keys[0], value)
GC.start
case operation
when "read" then count.times { cache.read(keys[0]) }
when "write" then count.times { cache.write(keys[0], value) }
when "fetch" then count.times { cache.fetch(keys[0]) { raise "a miss" } }
when "multi" then count.times { cache.read_multi(*keys) }
end
