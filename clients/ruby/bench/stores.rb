# frozen_string_literal: true

# The 001 comparison in Ruby (issue 18 target 2, issue 34): ActiveSupport::Cache::LarderStore against the store a Rails
# app would otherwise use on the same server: MemCacheStore (Dalli) on one memcached, RedisCacheStore on one Redis
# (both started here on free ports), and ActiveSupport's MemoryStore against LarderStore on memory://. Each store with
# its defaults (LarderStore: MessagePack, LZ4 above 1 KiB; Rails 6.1's: Marshal, Zlib above 1 KiB, MemoryStore
# uncompressed), but larder's network stores time out after 1 s, as Dalli does, not 250 ms (a fetch of a 64 KiB
# value timed out on a machine at load average 20, and the benchmark measures speed, not timeouts). Operations: read,
# write, fetch (a hit), and read_multi of 100 keys for the text values.
#
# Values (bench/values.rb): HTML-like text of 1 KiB and 64 KiB, a rendered page (24 KiB), a query result as
# `as_json` gives it (a Hash holding an Array of small Hashes: 16 rows, ~1 KiB, and 1,100 rows, ~64 KiB packed) and a
# nested document (~5 KiB). What the comparison measures differs by store: Dalli and Redis serialize (Marshal) and
# compress (Zlib) as LarderStore serializes (MessagePack) and compresses (LZ4); MemoryStore keeps the Ruby object and
# copies it on every write and read (`dup` for a String; for anything else a Marshal dump and load, and one more dump
# to size it on a write), while memory:// keeps a larder entry (bytes every language reads) and decodes a copy per
# read. So against MemoryStore it is what a user compares, a cache write and read of the same value with the same
# isolation (the caller's changes do not reach the cache), done two different ways.
#
# One thread. The machine is shared, so every figure is a ratio measured side by side: ROUNDS rounds (default 5), and
# in each round every cell is measured for SECONDS (default 0.3) on the larder store and on its reference, in
# alternating order; the tables give the median ops/s and the median of the per-round ratios (larder / reference).
#
#   ruby clients/ruby/bench/stores.rb [--raw FILE]
#   ROUNDS=7 SECONDS=0.5 ONLY=memory VALUES="query 64K,text 1K" ruby clients/ruby/bench/stores.rb
#   LIB=/path/to/another/checkout/clients/ruby/lib ruby clients/ruby/bench/stores.rb   # an older client, same script
#
# `--raw FILE` (or RAW=FILE) appends every round to FILE in bench/report.py's raw format (bench "ruby"; subjects
# "larder-<store>" and the references; one case per value and operation; target: each larder store >= 1.0x its
# reference in ops/s).
# Debian: ruby-activesupport ruby-dalli ruby-redis memcached redis-server.
$LOAD_PATH.unshift ENV.fetch("LIB") { File.expand_path("../lib", __dir__) }
require "json"
require "time"
require "etc"
require "socket"
require "securerandom"
require "active_support"
require "active_support/cache"
require "active_support/cache/memory_store"
require "active_support/cache/mem_cache_store"
require "active_support/cache/redis_cache_store"
require "active_support/cache/larder_store"
require_relative "values"

SECONDS = Float(ENV.fetch("SECONDS", "0.3"))
ROUNDS = Integer(ENV.fetch("ROUNDS", "5"))
ONLY = ENV["ONLY"]&.split(",")
VALUES = BenchValues.all.select { |name, _| ENV["VALUES"].nil? || ENV["VALUES"].split(",").include?(name) }.freeze
RAW = ARGV.include?("--raw") ? ARGV.fetch(ARGV.index("--raw") + 1) : ENV.fetch("RAW", nil)

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
  "memcached" => [ActiveSupport::Cache::LarderStore.new("memcached://127.0.0.1:#{memcached}?timeout=1s"),
                  ActiveSupport::Cache::MemCacheStore.new("127.0.0.1:#{memcached}"), "MemCacheStore (Dalli 3.0.6)"],
  "redis" => [ActiveSupport::Cache::LarderStore.new("redis://127.0.0.1:#{redis}/0?timeout=1s"),
              ActiveSupport::Cache::RedisCacheStore.new(url: "redis://127.0.0.1:#{redis}/0"),
              "RedisCacheStore (redis 4.8)"]
}.select { |name, _| ONLY.nil? || ONLY.include?(name) }.freeze
OPS = ["read", "write", "fetch hit", "read_multi 100"].freeze

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

# The keys of one store and value, written and read back once.
def prepare(cache, name, value)
  prefix = "bench:#{name.tr(' ', '-')}:#{SecureRandom.hex(4)}"
  keys = Array.new(100) { |i| "#{prefix}:#{i}" }
  keys.each { |key| cache.write(key, value) }
  raise "#{cache.class} did not read #{name} back" unless cache.read(keys.first) == value
  raise "#{cache.class} did not read_multi back" unless cache.read_multi(*keys).size == 100

  [keys, value]
end

# The operations measured for a value: read_multi for the text values only (the targets are read, write and fetch).
def operations(name)
  name.start_with?("text") ? OPS : OPS - ["read_multi 100"]
end

def run(cache, operation, keys, value)
  case operation
  when "read" then rate { cache.read(keys.first) }
  when "write" then rate { cache.write(keys.first, value) }
  when "fetch hit" then rate { cache.fetch(keys.first) { raise "miss" } }
  when "read_multi 100" then rate { cache.read_multi(*keys) }
  end
end

started_at = Time.now.utc
setup = "ruby #{RUBY_VERSION}, ActiveSupport #{ActiveSupport::VERSION::STRING}, #{ROUNDS} rounds of #{SECONDS}s per " \
        "cell, interleaved, one thread, #{Etc.nprocessors} cores"
puts setup
prepared = {}
PAIRS.each do |pair, (larder, reference, _)|
  VALUES.each do |name, value|
    prepared[[pair, name]] = [prepare(larder, name, value), prepare(reference, name, value)]
  end
end
# [pair, value, op] => { larder: [ops/s…], reference: [ops/s…], ratio: [...] }
figures = Hash.new { |hash, key| hash[key] = { larder: [], reference: [], ratio: [] } }
ROUNDS.times do |round|
  VALUES.each_key do |name|
    operations(name).each do |operation|
      PAIRS.each do |pair, (larder, reference, _)|
        (larder_data, reference_data) = prepared[[pair, name]]
        order = round.even? ? %i[larder reference] : %i[reference larder]
        measured = order.to_h do |which|
          store, data = which == :larder ? [larder, larder_data] : [reference, reference_data]
          [which, run(store, operation, *data)]
        end
        cell = figures[[pair, name, operation]]
        cell[:larder] << measured[:larder]
        cell[:reference] << measured[:reference]
        cell[:ratio] << (measured[:larder] / measured[:reference])
      end
    end
  end
  warn "round #{round + 1}/#{ROUNDS} done"
end

def ratio_cell(cell)
  format("**%<median>.2f×** (%<min>.2f–%<max>.2f)", median: median(cell[:ratio]), min: cell[:ratio].min,
                                                    max: cell[:ratio].max)
end

VALUES.each_key do |name|
  ops = operations(name)
  puts
  puts "#{name}: median ops/s, and LarderStore / reference (median of the per-round ratios, min-max)"
  puts
  puts "| store | #{ops.join(' | ')} |"
  puts "|---|#{'---|' * ops.size}"
  PAIRS.each do |pair, (_, _, reference_name)|
    cells = ops.map { |operation| figures[[pair, name, operation]] }
    puts "| LarderStore (#{pair}) | #{cells.map { |cell| median(cell[:larder]).round }.join(' | ')} |"
    puts "| #{reference_name} | #{cells.map { |cell| median(cell[:reference]).round }.join(' | ')} |"
    puts "| ratio | #{cells.map { |cell| ratio_cell(cell) }.join(' | ')} |"
  end
end

# bench/report.py's raw rows: one meta line, then one row per subject, case and round.
if RAW
  reference_subject = PAIRS.to_h { |pair, (_, _, reference_name)| [pair, reference_name.split(" (").first] }
  meta = { meta: true, bench: "ruby", date: started_at.iso8601,
           title: "Ruby: LarderStore against Rails' own cache stores (ops/s, one thread)",
           command: "ruby clients/ruby/bench/stores.rb --raw FILE", setup: setup, subject: "larder-memory",
           metrics: [{ name: "ops", label: "ops/s", better: "higher" }],
           pairs: PAIRS.keys.map { |pair| { subject: "larder-#{pair}", vs: reference_subject[pair] } },
           targets: PAIRS.keys.map do |pair|
             { case: "*", vs: reference_subject[pair], subject: "larder-#{pair}", metric: "ops", ratio: 1.0 }
           end,
           notes: ["values: bench/values.rb (text 1K/64K, page 24K, query result 1K/64K, nested document 5K)",
                   "MemoryStore keeps Ruby objects and copies them (Marshal for non-Strings); memory:// keeps " \
                   "larder entries and decodes a copy per read"] }
  File.open(RAW, "a") do |out|
    out.puts JSON.generate(meta)
    figures.each do |(pair, name, operation), cell|
      cell[:larder].each_index do |index|
        { "larder-#{pair}" => cell[:larder][index], reference_subject[pair] => cell[:reference][index] }
          .each do |subject, ops|
          out.puts JSON.generate(bench: "ruby", case: "#{name} #{operation}", subject: subject, round: index + 1,
                                 ops: ops.round(1))
        end
      end
    end
  end
end
