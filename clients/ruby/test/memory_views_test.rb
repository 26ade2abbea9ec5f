# frozen_string_literal: true

# The memory store's views (Larder::Stores::Memory#get_view): what a reader decoded from an entry's bytes, kept
# beside them so that LarderStore on memory:// decodes an entry once rather than on every read. A view belongs to
# its owner and to the bytes it came from, is counted in the store's bytes, and LarderStore hands out copies of it.
require_relative "test_helper"
require "active_support/cache/larder_store"

class MemoryViewsTest < Minitest::Test
  def setup
    @store = Larder::Stores::Memory.new
    @owner = Object.new
  end

  def view(key, owner = @owner)
    calls = 0
    object = @store.get_view(key, owner) do |bytes|
      calls += 1
      ["decoded #{bytes}", true]
    end
    [object, calls]
  end

  def test_a_view_is_made_once_per_bytes_and_owner
    @store.set("k", "one")
    assert_equal ["decoded one", 1], view("k")
    assert_equal ["decoded one", 0], view("k"), "kept"
    assert_equal ["decoded one", 1], view("k", Object.new), "another owner decodes for itself"
    @store.set("k", "two")
    assert_equal ["decoded two", 1], view("k"), "new bytes, new view"
    assert_equal [nil, 0], view("missing")
  end

  def test_views_of_many_keys_in_order_under_one_lock
    @store.set("a", "1")
    @store.set("b", "2")
    calls = []
    decode = ->(bytes) { (calls << bytes) && ["decoded #{bytes}", true] }
    assert_equal ["decoded 1", nil, "decoded 2"], @store.views(%w[a missing b], @owner, &decode)
    assert_equal %w[1 2], calls
    assert_equal ["decoded 2", "decoded 1"], @store.views(%w[b a], @owner, &decode)
    assert_equal %w[1 2], calls, "kept: not decoded again"
    assert_equal ["decoded 1"], @store.views(%w[a], Object.new, &decode)
    assert_equal %w[1 2 1], calls, "another owner decodes for itself"
  end

  def test_a_view_the_block_does_not_keep_is_made_again
    @store.set("k", "v")
    2.times { assert_equal("x", @store.get_view("k", @owner) { ["x", false] }) }
    calls = 0
    @store.get_view("k", @owner) { (calls += 1) && ["y", false] }
    assert_equal 1, calls
  end

  def test_views_are_counted_and_the_capacity_holds
    @store.set("k", "v")
    before = @store.bytes
    view("k")
    assert_equal before + Larder::Stores::Memory::VIEW_OVERHEAD, @store.bytes
    view("k", Object.new) # replaces the view: counted once
    assert_equal before + Larder::Stores::Memory::VIEW_OVERHEAD, @store.bytes
    @store.delete("k")
    assert_equal 0, @store.bytes

    small = Larder::Stores::Memory.new(capacity: 2 * (Larder::Stores::Memory::OVERHEAD + 2))
    small.set("a", "1")
    small.set("b", "2")
    small.get_view("a", @owner) { ["x", true] } # a's view pushes the store past its capacity: b goes
    assert_operator small.bytes, :<=, small.capacity
    assert_nil small.get("b")
  end

  def test_an_expired_entry_has_no_view
    entry = Larder.encode("v", created_at: Larder.now_ms - 10_000, expires_at: Larder.now_ms + 500)
    @store.set("k", entry)
    refute_nil view("k").first
    sleep 0.6
    assert_equal [nil, 0], view("k")
  end

  def cache(**options)
    ActiveSupport::Cache::LarderStore.new(Larder::Stores::Memory.new, **options)
  end

  def test_larder_store_hands_out_copies
    store = cache
    store.write("s", +"text")
    first = store.read("s")
    first << " changed"
    assert_equal "text", store.read("s")
    assert_equal({ "s" => "text" }, store.read_multi("s"))
    assert_equal "text", store.fetch("s") { raise "a hit" }
  end

  def test_larder_store_keeps_what_shares_the_bytes_only
    store = cache(compress: true, compress_threshold: 1)
    store.write("c", "z" * 100) # compressed: a view would hold a second, decompressed copy
    store.write("h", { "a" => [1] }) # a Hash: every reader gets its own, decoded afresh
    store.write("p", "plain", compress: false)
    before = store.larder.bytes
    3.times { store.read("c") && store.read("h") }
    assert_equal before, store.larder.bytes, "no view kept"
    store.read("h")["a"] << 2
    assert_equal({ "a" => [1] }, store.read("h"))
    store.larder.set("p2", store.larder.get("p")) # the same bytes, written by another writer: no view yet
    before = store.larder.bytes
    assert_equal "plain", store.read("p2")
    assert_equal before + Larder::Stores::Memory::VIEW_OVERHEAD, store.larder.bytes, "a plain String's view is kept"
  end

  def test_larder_store_sees_expiry_and_versions_through_views
    store = cache
    store.write("k", "v", expires_in: 0.5, version: "1") # long enough for a loaded machine to read it in time
    assert_equal "v", store.read("k", version: "1")
    assert_nil store.read("k", version: "2")
    sleep 0.6
    assert_nil store.read("k", version: "1")
  end
end
