# frozen_string_literal: true

require_relative "test_helper"
require "active_support/cache/larder_store"
require "tmpdir"

# LarderStore's options in the shapes ActiveSupport 7.1+ documents (serializer:, compressor:, coder:), and what each
# writes into the larder entry. Runs on the installed ActiveSupport (6.1 here); see README for what was verified where.
class LarderStoreOptionsTest < Minitest::Test
  Point = Struct.new(:x, :y)

  # A value serializer in 7.1's shape: dump(value) / load(bytes).
  module Reversed
    module_function

    def dump(value)
      value.to_s.reverse
    end

    def load(bytes)
      bytes.reverse
    end
  end

  def store(**options)
    ActiveSupport::Cache::LarderStore.new("memory://", signing_secret: "options-test-secret", **options)
  end

  def entry(cache, key)
    Larder.decode(cache.larder.get(key))
  end

  def test_message_pack_is_the_larder_serializer
    cache = store(serializer: :message_pack)
    cache.write("k", { "a" => [1, 2] })
    assert_equal "msgpack", entry(cache, "k").serializer
    assert_equal({ "a" => [1, 2] }, entry(cache, "k").value, "plain MessagePack, as every language reads it")
  end

  # Every value as a signed Marshal ext (spec/FORMAT.md §2), plain ones too, as 7.1's Marshal serializers dump all.
  def test_marshal_serializers_write_signed_marshal_values
    [:marshal_6_1, :marshal_7_0, :marshal_7_1, Marshal].each do |name|
      cache = store(serializer: name)
      [Point.new(1, 2), "plain"].each do |value|
        cache.write("k", value)
        ext = entry(cache, "k").value
        assert_equal [101, Marshal.dump(value)],
                     [ext.type, Larder::SignedExt.new("options-test-secret").verify(101, ext.payload)], name
        assert_equal value, cache.read("k")
      end
    end
  end

  def test_a_serializer_object_dumps_the_value
    cache = store(serializer: Reversed)
    cache.write("k", "hello")
    assert_equal "olleh", entry(cache, "k").value
    assert_equal "hello", cache.read("k")
  end

  def test_compressor_zlib_is_gzip_and_other_objects_are_refused
    cache = store(compressor: Zlib, compress_threshold: 16)
    cache.write("k", "x" * 500)
    assert_equal "gzip", entry(cache, "k").compressor
    assert_equal "x" * 500, cache.read("k")
    assert_equal "zstd", (store(compressor: :zstd, compress_threshold: 16).tap { |c| c.write("k", "y" * 500) }
                            .then { |c| entry(c, "k").compressor })
    error = assert_raises(ArgumentError) { store(compressor: Object.new) }
    assert_includes error.message, "records its compressor"
    assert_raises(ArgumentError) { store(compressor: "lzma") }
  end

  def test_coder_excludes_serializer_and_compressor
    assert_raises(ArgumentError) { store(coder: Marshal, serializer: :marshal_7_1) }
    assert_raises(ArgumentError) { store(coder: Marshal, compressor: Zlib) }
    cache = store(coder: nil)
    cache.write("k", { "plain" => true })
    assert_equal "msgpack", entry(cache, "k").serializer, "coder: nil is the default"
  end

  def test_counters_take_options_as_keywords
    cache = store
    assert_equal 5, cache.increment("c", 5)
    assert_equal 7, cache.increment("c", 2, expires_in: 60), "what 6.1's and 7.1+'s LocalCache pass on"
    assert_equal 6, cache.decrement("c", 1, expires_in: 60)
    assert_equal "6", cache.larder.get("c"), "a bare counter (spec/STORES.md §3)"
  end

  def test_the_7_1_serialized_entry_hooks_round_trip
    cache = store
    entry = ActiveSupport::Cache::Entry.new({ "v" => 1 }, version: "v2")
    bytes = cache.send(:serialize_entry, entry)
    assert_equal "v2", Larder.decode(bytes).version
    assert cache.send(:write_serialized_entry, "key", bytes)
    read = cache.send(:deserialize_entry, cache.send(:read_serialized_entry, "key"))
    assert_equal [{ "v" => 1 }, "v2"], [read.value, read.version]
  end

  # On memory://, as ActiveSupport's MemoryStore: no compression unless the store or the call asks for it (compress:
  # true, or a compressor:); every other store compresses by default (test_compress_and_compress_threshold_...).
  def test_memory_is_not_compressed_by_default
    large = "0" * 2048
    plain = store
    plain.write("k", large)
    assert_equal "none", entry(plain, "k").compressor
    plain.write("k", large, compress: true)
    assert_equal "lz4", entry(plain, "k").compressor, "the call's compress: true"
    zstd = store(compressor: :zstd)
    zstd.write("k", large)
    assert_equal "zstd", entry(zstd, "k").compressor, "a compressor: asks for compression"
    assert_equal large, plain.read("k")
    Dir.mktmpdir("larder-options") do |root|
      remote = ActiveSupport::Cache::LarderStore.new(Larder::Stores::File.new(root))
      remote.write("k", large)
      assert_equal "lz4", entry(remote, "k").compressor, "a store other than memory:// compresses by default"
    end
  end

  # compress: and compress_threshold: as Rails documents them, per store and per call: a payload below the threshold
  # is stored uncompressed, one at or above it compressed when that makes it smaller, none with compress: false.
  def test_compress_and_compress_threshold_per_store_and_per_call
    small = "0" * 100
    large = "0" * 2048
    random = Random.new(7).bytes(2048)
    cache = store(compress: true) # memory:// compresses only when asked (test_memory_is_not_compressed_by_default)
    {
      ["small", small, {}] => "none", ["large", large, {}] => "lz4", ["random", random, {}] => "none",
      ["small-low", small, { compress_threshold: 1 }] => "lz4",
      ["large-off", large, { compress: false }] => "none",
      ["large-high", large, { compress_threshold: 1 << 20 }] => "none"
    }.each do |(key, value, options), compressor|
      cache.write(key, value, **options)
      assert_equal compressor, entry(cache, key).compressor, "#{key} #{options}"
      assert_equal value, cache.read(key)
    end
    low = store(compress_threshold: 1, compressor: :zstd)
    low.write("k", small)
    assert_equal "zstd", entry(low, "k").compressor, "the store's threshold"
    low.write("k", small, compress_threshold: 4096)
    assert_equal "none", entry(low, "k").compressor, "the call's threshold over the store's"
    off = store(compress: false)
    off.write("k", large)
    assert_equal "none", entry(off, "k").compressor
    off.write("k", large, compress: true)
    assert_equal "lz4", entry(off, "k").compressor, "the call's compress: over the store's"
  end
end
