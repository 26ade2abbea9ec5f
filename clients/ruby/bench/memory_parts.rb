# frozen_string_literal: true

# Where a LarderStore operation on memory:// spends its time, beside ActiveSupport's MemoryStore (issue 18 target 2:
# the profile behind the memory figures of bench/stores.rb). CPU time per call (CLOCK_PROCESS_CPUTIME_ID, so other
# processes on the machine count less than in wall time), the best of 5 runs of N calls, for the whole operation of
# each store and for the parts of LarderStore's: ActiveSupport's own bookkeeping (shared with MemoryStore), the
# write of a String held as its entry's head and itself (write_parts), the eager encoding other values take, the
# byte store's set and view, decoding.
#
#   ruby clients/ruby/bench/memory_parts.rb            # 1 KiB values
#   SIZE=65536 ruby clients/ruby/bench/memory_parts.rb
#   clients/ruby/bench/memory_parts_instructions.sh   # instructions per call instead (CALLGRIND=1, callgrind)
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

# `per`: the number of keys one call reads, to print µs per key. With CALLGRIND=1: one run of N calls, between two
# calls of Process.getsid (which memory_parts_instructions.sh has callgrind dump its counts before), and the name.
def part(name, per = 1, &)
  yield
  if ENV["CALLGRIND"]
    GC.start
    Process.getsid
    N.times(&)
    return puts("#{name}\t#{per}")
  end

  best = Array.new(5) do
    started = cpu
    N.times(&)
    (cpu - started) / N / per * 1e6
  end.min
  puts format("| %-58s | %6.2f |", name, best)
end

value = "x" * SIZE
larder = ActiveSupport::Cache::LarderStore.new("memory://")
memory = ActiveSupport::Cache::MemoryStore.new
keys = Array.new(100) { |i| "k#{i}" }
[larder, memory].each { |cache| keys.each { |key| cache.write(key, value) } }
raw = Larder.encode(value, compressor: "none")
entry = ActiveSupport::Cache::Entry.new(value, compress: false)
header, = Larder.decode_payload(raw)
head = Larder::Header.value_head(1, 0, 0, nil, [])
body = value.dup.freeze
view = [larder, entry].freeze

unless ENV["CALLGRIND"]
  puts "ruby #{RUBY_VERSION}, ActiveSupport #{ActiveSupport::VERSION::STRING}, #{SIZE}-byte String, CPU µs per call"
  puts
  puts "| part | µs |"
  puts "|---|---|"
end
part("(an empty call, the loop's own cost)") { nil }
at_exit { Process.getsid } # closes the last part's count
part("MemoryStore#write") { memory.write("k0", value) }
part("LarderStore#write") { larder.write("k0", value) }
part("  ActiveSupport: instrument (an empty block)") { larder.send(:instrument, :write, "k0", {}) { nil } }
part("  ActiveSupport: normalize_key") { larder.send(:normalize_key, "k0", larder.options) }
part("  ActiveSupport: Entry.new") { ActiveSupport::Cache::Entry.new(value, compress: false) }
part("  larder: write_parts (a String held as head + itself)") do
  larder.send(:write_parts, "k0", entry, larder.options)
end
part("    of which Header.value_head") { Larder::Header.value_head(1, 0, 0, nil, []) }
part("    of which the created_at (the clock ActiveSupport's Entry read)") { larder.send(:created_ms, entry) }
part("    of which Keys.safe_key") { Larder::Keys.safe_key("k0") }
part("    of which Memory#put_parts (LRU, capacity)") { larder.larder.put_parts("k0", head, body, nil, view) }
part("    of which the MessagePack head") { Larder::Serializers.append_string_head(body, String.new) }
part("    of which the Entry's copy of the value (dup_value!, as MemoryStore)") { entry.dup_value! && entry.value }
part("    of which the header's times on the kept Entry") { larder.send(:entry_times, entry, 1_700_000_000_000, 0) }
part("  larder: parts? (whether a write takes write_parts)") { larder.send(:parts?, value, larder.options) }
part("  larder: serialize_entry (eager: values not held as parts)") do
  larder.send(:serialize_entry, entry, **larder.options)
end
part("  larder: Memory#set of entry bytes (key check, expiry from the header)") { larder.larder.set("k1", raw) }
part("MemoryStore#read") { memory.read("k0") }
part("LarderStore#read") { larder.read("k0") }
part("  larder: Memory#view (the kept Entry)") { larder.larder.view("k0", larder) { raise } }
part("  larder: decoding an entry (what a view saves)") { larder.send(:to_as_entry, raw) }
part("    of which Header.read") { Larder::Header.read(raw) }
part("    of which the ActiveSupport Entry") { larder.send(:as_entry, value, header) }
part("MemoryStore#fetch (a hit)") { memory.fetch("k0") { raise } }
part("LarderStore#fetch (a hit)") { larder.fetch("k0") { raise } }
part("MemoryStore#read_multi (100 keys), per key", 100) { memory.read_multi(*keys) }
part("LarderStore#read_multi (100 keys), per key", 100) { larder.read_multi(*keys) }
