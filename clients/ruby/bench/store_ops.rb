# frozen_string_literal: true

# Store-level and LarderStore operations on one server, for comparing two checkouts of this library side by side
# (issue 15 measured its bounded readers with it): larder's memcached or Redis store `get`, `get_many` of 100 keys and
# `set` of a 1 KiB entry, then LarderStore `read` and `write` of a 1 KiB String. One thread, ops/s over SECONDS
# (default 1) per figure, printed on one line.
#
#   ruby clients/ruby/bench/store_ops.rb <lib directory> memcached://127.0.0.1:11211
#   ruby clients/ruby/bench/store_ops.rb <lib directory> redis://127.0.0.1:6379/0
lib, url = ARGV
abort "usage: store_ops.rb LIB_DIR STORE_URL" unless lib && url
$LOAD_PATH.unshift lib
require "larder"
require "larder/stores"
require "active_support/cache/larder_store"

SECONDS = Float(ENV.fetch("SECONDS", "1"))

def rate
  count = 0
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + SECONDS
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    yield
    count += 1
  end
  (count / SECONDS).round
end

store = Larder::Stores.open(url)
rails = ActiveSupport::Cache::LarderStore.new(url, namespace: "bench")
keys = Array.new(100) { |i| "bench:#{i}" }
entry = Larder.encode("x" * 1024, compressor: "none")
text = "y" * 1024
keys.each do |key|
  store.set(key, entry)
  rails.write(key, text)
end
figures = [rate { store.get(keys[0]) }, rate { store.get_many(keys) }, rate { store.set(keys[1], entry) },
           rate { rails.read(keys[0]) }, rate { rails.write(keys[1], text) }]
puts "get #{figures[0]} get_many100 #{figures[1]} set #{figures[2]} rails_read #{figures[3]} rails_write #{figures[4]}"
