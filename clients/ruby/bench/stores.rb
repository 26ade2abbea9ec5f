# frozen_string_literal: true

# The 001 comparison in Ruby (issue 18 target 2): ActiveSupport::Cache::LarderStore against the store a Rails app
# would otherwise use on the same server: MemCacheStore (Dalli) on one memcached, RedisCacheStore on one Redis (both
# started here on free ports), and ActiveSupport's MemoryStore against LarderStore on memory://. Each store with its
# defaults (LarderStore: MessagePack, LZ4 above 1 KiB; Rails 6.1's: Marshal, Zlib above 1 KiB, MemoryStore
# uncompressed). Operations: read, write, fetch (a hit), read_multi of 100 keys; values of 1 KiB and 64 KiB
# (HTML-like text). One thread.
#
# The machine is shared, so every figure is a ratio measured side by side: ROUNDS rounds (default 5), and in each
# round every cell is measured for SECONDS (default 0.3) on the larder store and on its reference, in alternating
# order; the tables give the median ops/s and the median of the per-round ratios (larder / reference).
#
#   ruby clients/ruby/bench/stores.rb
#   ROUNDS=7 SECONDS=0.5 ruby clients/ruby/bench/stores.rb
# Debian: ruby-activesupport ruby-dalli ruby-redis memcached redis-server.
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "etc"
require "socket"
require "securerandom"
require "active_support"
require "active_support/cache"
require "active_support/cache/memory_store"
require "active_support/cache/mem_cache_store"
require "active_support/cache/redis_cache_store"
require "active_support/cache/larder_store"

SECONDS = Float(ENV.fetch("SECONDS", "0.3"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "5"))
SIZES = ENV.fetch("SIZES", "1024,65536").split(",").map { |size| Integer(size) }
ONLY = ENV["ONLY"]&.split(",")

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

# name => [larder store, reference store, reference's name]
PAIRS = {
  "memory" => [ActiveSupport::Cache::LarderStore.new("memory://"), ActiveSupport::Cache::MemoryStore.new,
               "MemoryStore"],
  "memcached" => [ActiveSupport::Cache::LarderStore.new("memcached://127.0.0.1:#{memcached}"),
                  ActiveSupport::Cache::MemCacheStore.new("127.0.0.1:#{memcached}"), "MemCacheStore (Dalli 3.0.6)"],
  "redis" => [ActiveSupport::Cache::LarderStore.new("redis://127.0.0.1:#{redis}/0"),
              ActiveSupport::Cache::RedisCacheStore.new(url: "redis://127.0.0.1:#{redis}/0"),
              "RedisCacheStore (redis 4.8)"]
}.select { |name, _| ONLY.nil? || ONLY.include?(name) }.freeze
OPS = ["read", "write", "fetch hit", "read_multi 100"].freeze

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
  clock = Process::CLOCK_MONOTONIC
  started = Process.clock_gettime(clock)
  deadline = started + SECONDS
  now = started
  while now < deadline
    yield
    count += 1
    now = Process.clock_gettime(clock)
  end
  count / (now - started)
end

def median(values)
  sorted = values.sort
  middle = sorted.size / 2
  sorted.size.odd? ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0
end

# The keys of one store and size, written and read back once.
def prepare(cache, size)
  value = value_of(size)
  prefix = "bench:#{size}:#{SecureRandom.hex(4)}"
  keys = Array.new(100) { |i| "#{prefix}:#{i}" }
  keys.each { |key| cache.write(key, value) }
  raise "#{cache.class} did not read back" unless cache.read(keys.first) == value
  raise "#{cache.class} did not read_multi back" unless cache.read_multi(*keys).size == 100

  [keys, value]
end

def run(cache, operation, keys, value)
  case operation
  when "read" then rate { cache.read(keys.first) }
  when "write" then rate { cache.write(keys.first, value) }
  when "fetch hit" then rate { cache.fetch(keys.first) { raise "miss" } }
  when "read_multi 100" then rate { cache.read_multi(*keys) }
  end
end

puts "ruby #{RUBY_VERSION}, ActiveSupport #{ActiveSupport::VERSION::STRING}, #{ROUNDS} rounds of #{SECONDS}s per " \
     "cell, interleaved, one thread, #{Etc.nprocessors} cores"
prepared = {}
PAIRS.each do |pair, (larder, reference, _)|
  SIZES.each do |size|
    prepared[[pair, size]] = [prepare(larder, size), prepare(reference, size)]
  end
end
# [pair, size, op] => { larder: [ops/s…], reference: [ops/s…], ratio: [...] }
figures = Hash.new { |hash, key| hash[key] = { larder: [], reference: [], ratio: [] } }
ROUNDS.times do |round|
  SIZES.each do |size|
    OPS.each do |operation|
      PAIRS.each do |pair, (larder, reference, _)|
        (larder_data, reference_data) = prepared[[pair, size]]
        order = round.even? ? %i[larder reference] : %i[reference larder]
        measured = order.to_h do |which|
          store, data = which == :larder ? [larder, larder_data] : [reference, reference_data]
          [which, run(store, operation, *data)]
        end
        cell = figures[[pair, size, operation]]
        cell[:larder] << measured[:larder]
        cell[:reference] << measured[:reference]
        cell[:ratio] << (measured[:larder] / measured[:reference])
      end
    end
  end
  warn "round #{round + 1}/#{ROUNDS} done"
end

SIZES.each do |size|
  puts
  puts "#{size / 1024} KiB values: median ops/s, and LarderStore / reference (median of the per-round ratios, " \
       "min-max)"
  puts
  puts "| store | #{OPS.join(' | ')} |"
  puts "|---|#{'---|' * OPS.size}"
  PAIRS.each do |pair, (_, _, reference_name)|
    cells = OPS.map { |operation| figures[[pair, size, operation]] }
    puts "| LarderStore (#{pair}) | #{cells.map { |cell| median(cell[:larder]).round }.join(' | ')} |"
    puts "| #{reference_name} | #{cells.map { |cell| median(cell[:reference]).round }.join(' | ')} |"
    ratios = cells.map do |cell|
      format("**%<median>.2f×** (%<min>.2f–%<max>.2f)", median: median(cell[:ratio]), min: cell[:ratio].min,
                                                        max: cell[:ratio].max)
    end
    puts "| ratio | #{ratios.join(' | ')} |"
  end
end
