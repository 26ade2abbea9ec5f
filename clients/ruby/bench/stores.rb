# frozen_string_literal: true

# The 001 comparison in Ruby: ActiveSupport::Cache::LarderStore against MemCacheStore (Dalli) and RedisCacheStore on
# the same memcached and Redis servers (started here on free ports), each with its defaults (LarderStore: LZ4 above
# 1 KiB, MessagePack; Rails 6.1's: Zlib above 1 KiB, Marshal). Operations: read, write, fetch (a hit), read_multi of
# 100 keys; values of 1 KiB and 64 KiB (HTML-like text). One thread, ops/s over SECONDS (default 1) per cell.
#
#   ruby clients/ruby/bench/stores.rb
# Debian: ruby-activesupport ruby-dalli ruby-redis memcached redis-server.
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "etc"
require "socket"
require "securerandom"
require "active_support"
require "active_support/cache"
require "active_support/cache/mem_cache_store"
require "active_support/cache/redis_cache_store"
require "active_support/cache/larder_store"

SECONDS = Float(ENV.fetch("SECONDS", "1"))

def free_port
  server = TCPServer.new("127.0.0.1", 0)
  server.addr[1]
ensure
  server&.close
end

def start(*command, port)
  pid = Process.spawn(*command, out: File::NULL, err: File::NULL)
  at_exit { Process.kill("TERM", pid) }
  100.times do
    TCPSocket.new("127.0.0.1", port).close
    return
  rescue SystemCallError
    sleep 0.05
  end
  abort "#{command.first} did not start: run `make services`"
end

memcached = free_port
redis = free_port
start("memcached", "-l", "127.0.0.1", "-p", memcached.to_s, "-m", "256", "-U", "0", "-t", "1", "-u", "root", memcached)
start("redis-server", "--bind", "127.0.0.1", "--port", redis.to_s, "--save", "", "--appendonly", "no", redis)

STORES = {
  "LarderStore (memcached)" => ActiveSupport::Cache::LarderStore.new("memcached://127.0.0.1:#{memcached}"),
  "MemCacheStore (Dalli 3.0.6)" => ActiveSupport::Cache::MemCacheStore.new("127.0.0.1:#{memcached}"),
  "LarderStore (Redis)" => ActiveSupport::Cache::LarderStore.new("redis://127.0.0.1:#{redis}/0"),
  "RedisCacheStore (redis 4.8)" => ActiveSupport::Cache::RedisCacheStore.new(url: "redis://127.0.0.1:#{redis}/0")
}.freeze

# HTML-like text of `size` bytes: compresses as pages and fragments do (about 4-6x).
def value_of(size)
  words = %w[<div class="product"> <span> </span> price name stock available <a href="/p/ "> </a> </div> shipping]
  random = Random.new(size)
  text = +""
  text << words[random.rand(words.size)] << " " << random.rand(100_000).to_s << " " while text.bytesize < size
  text.byteslice(0, size)
end

def rate
  count = 0
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + SECONDS
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    yield
    count += 1
  end
  (count / SECONDS).round
end

def measure(cache, size)
  value = value_of(size)
  prefix = "bench:#{size}:#{SecureRandom.hex(4)}"
  keys = Array.new(100) { |i| "#{prefix}:#{i}" }
  keys.each { |key| cache.write(key, value) }
  raise "#{cache.class} did not read back" unless cache.read(keys.first) == value

  { "read" => rate { cache.read(keys.first) },
    "write" => rate { cache.write(keys.first, value) },
    "fetch hit" => rate { cache.fetch(keys.first) { raise "miss" } },
    "read_multi 100" => rate { cache.read_multi(*keys) } }
end

puts "ruby #{RUBY_VERSION}, ActiveSupport #{ActiveSupport::VERSION::STRING}, #{SECONDS}s per cell, one thread, " \
     "#{Etc.nprocessors} cores"
[1024, 65_536].each do |size|
  puts
  puts "#{size / 1024} KiB values (ops/s)"
  puts
  puts "| store | read | write | fetch hit | read_multi 100 |"
  puts "|---|---|---|---|---|"
  STORES.each do |name, cache|
    figures = measure(cache, size)
    puts "| #{name} | #{figures.values.join(' | ')} |"
  end
end
