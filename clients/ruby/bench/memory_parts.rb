# frozen_string_literal: true

# Where a LarderStore operation on memory:// spends its time, beside ActiveSupport's MemoryStore (issue 18 target 2:
# the profile behind the memory figures of bench/stores.rb). CPU time per call (CLOCK_PROCESS_CPUTIME_ID, so other
# processes on the machine count less than in wall time), the best of 5 runs of N calls, for the whole operation of
# each store and for the parts of LarderStore's: ActiveSupport's own bookkeeping (shared with MemoryStore), encoding
# the larder entry, the byte store's set and get, decoding.
#
#   ruby clients/ruby/bench/memory_parts.rb            # 1 KiB values
#   SIZE=65536 ruby clients/ruby/bench/memory_parts.rb
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "active_support"
require "active_support/cache"
require "active_support/cache/memory_store"
require "active_support/cache/larder_store"

SIZE = Integer(ENV.fetch("SIZE", "1024"))
N = Integer(ENV.fetch("N", "20000"))

def cpu
  Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
end

def part(name, &)
  yield
  best = Array.new(5) do
    started = cpu
    N.times(&)
    (cpu - started) / N * 1e6
  end.min
  puts format("| %-58s | %6.2f |", name, best)
end

value = "x" * SIZE
larder = ActiveSupport::Cache::LarderStore.new("memory://")
memory = ActiveSupport::Cache::MemoryStore.new
[larder, memory].each { |cache| cache.write("k0", value) }
raw = larder.larder.get("k0")
entry = ActiveSupport::Cache::Entry.new(value, compress: false)
header, = Larder.decode_payload(raw)

puts "ruby #{RUBY_VERSION}, ActiveSupport #{ActiveSupport::VERSION::STRING}, #{SIZE}-byte String, CPU µs per call"
puts
puts "| part | µs |"
puts "|---|---|"
part("MemoryStore#write") { memory.write("k0", value) }
part("LarderStore#write") { larder.write("k0", value) }
part("  ActiveSupport: instrument (an empty block)") { larder.send(:instrument, :write, "k0", {}) { nil } }
part("  ActiveSupport: normalize_key") { larder.send(:normalize_key, "k0", {}) }
part("  ActiveSupport: Entry.new") { ActiveSupport::Cache::Entry.new(value, compress: false) }
part("  larder: serialize_entry (the whole entry, bytes)") { larder.send(:serialize_entry, entry, **larder.options) }
part("    of which Header.pack") do
  Larder::Header.pack(kind: "value", serializer: "msgpack", compressor: "none", created_at: 1, expires_at: 0,
                      stale_ms: 0, version: nil, tags: [])
end
part("  larder: Keys.safe_key") { Larder::Keys.safe_key("k0") }
part("  larder: Memory#set (key check, expiry from the header, LRU, capacity)") { larder.larder.set("k0", raw) }
part("MemoryStore#read") { memory.read("k0") }
part("LarderStore#read") { larder.read("k0") }
part("  larder: Memory#get") { larder.larder.get("k0") }
part("  larder: decoding an entry (what a view saves)") { larder.send(:to_as_entry, raw) }
part("    of which Header.read") { Larder::Header.read(raw) }
part("    of which the ActiveSupport Entry") { larder.send(:as_entry, value, header) }

# The floor a write of entries could reach if encoding cost nothing (as a store that kept the object and encoded
# lazily would, on the write): serialize_entry answers the bytes of the first write, then the byte store's set does
# nothing too. Last, since it replaces those two methods on this store object.
larder.define_singleton_method(:serialize_entry) { |_entry, **| raw }
part("LarderStore#write, entry bytes given (no encoding)") { larder.write("k0", value) }
larder.larder.define_singleton_method(:set) { |_key, _value, **| nil }
part("LarderStore#write, no encoding and a set that does nothing") { larder.write("k0", value) }
