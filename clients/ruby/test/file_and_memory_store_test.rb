# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/store_behaviour"
require "tmpdir"

# The file store on a real directory (spec/STORES.md §7).
class FileStoreTest < Minitest::Test
  include StoreBehaviour
  include KeySafety
  include StoreInterop

  def setup
    @dir = Dir.mktmpdir("larder-rb-files-")
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
  end

  def store_url
    "file://#{@dir}"
  end

  def unreachable_url
    nil
  end

  def test_files_follow_the_specs_layout
    key = unique("layout")
    data = entry("v", ttl_ms: 60_000)
    store.set(key, data)
    hash = Digest::SHA256.hexdigest(key)
    bytes = File.binread(File.join(@dir, hash[0, 2], hash[2, 2], hash))
    assert_equal "LDR1".b + [Larder.decode(data).expires_at, key.bytesize].pack("Q<S<") + key.b + data, bytes
  end

  def test_two_processes_share_a_counter
    key = unique("shared-counter")
    pids = Array.new(2) do
      fork do
        other = Larder::Stores.open(store_url)
        50.times { other.incr(key, 1) }
        exit!(0)
      end
    end
    pids.each { |pid| Process.wait(pid) }
    assert_equal 100, store.incr(key, 0)
  end
end

# The memory store (bounded, thread-safe).
class MemoryStoreTest < Minitest::Test
  include StoreBehaviour
  include KeySafety

  def store_url
    "memory://?capacity=16M"
  end

  def unreachable_url
    nil
  end

  def test_prefix_option_separates_applications
    assert_raises(Larder::UrlError) { Larder::Stores.open("memory://?prefix=a:") }
  end

  def test_capacity_bounds_bytes_evicting_least_recently_used
    small = Larder::Stores.open("memory://?capacity=10K")
    keys = Array.new(30) { |i| "k#{i}" }
    small.set("keep", "x" * 100)
    keys.each do |key|
      small.set(key, "y" * 1000)
      small.get("keep")
    end
    assert_operator small.bytes, :<=, 10 * 1024
    assert small.get("keep"), "the most recently used item stays"
    assert_nil small.get("k0")
    assert_raises(Larder::TooLarge) { small.set("huge", "z" * 20_000) }
  end

  def test_threads_share_it_safely
    key = "threads"
    shared = store # one store for every thread: `store` memoizes with ||=, which threads could race
    Array.new(8) { Thread.new { 200.times { shared.incr(key, 1) } } }.each(&:join)
    assert_equal 1600, shared.incr(key, 0)
  end
end
