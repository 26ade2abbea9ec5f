# frozen_string_literal: true

# LarderStore's write of a String on memory:// (write_parts, Larder::Stores::Memory#put_parts): the entry is held as
# its head and the value itself, not joined. Whenever bytes are asked for they must be exactly what the eager encoder
# writes for the same value and times; purges, expiry, versions and the capacity in bytes must hold as for a joined
# entry.
require_relative "test_helper"
require "active_support/cache/larder_store"

class MemoryPartsTest < Minitest::Test
  def cache(memory = Larder::Stores::Memory.new, **options)
    ActiveSupport::Cache::LarderStore.new(memory, **options)
  end

  # What serialize_entry's eager path (the one every other store takes) writes for `value` with the header's times.
  def eager(value, header)
    parts = Larder::RubyValues.dump_parts(value, signer: nil, marshal: :never)
    Larder.encode_serialized(parts, serializer: "msgpack", compressor: "none", created_at: header.created_at,
                                    expires_at: header.expires_at, stale_ms: header.stale_ms, version: header.version,
                                    tags: header.tags)
  end

  def random_value(random)
    length = [0, 1, 31, 32, 255, 256, 1000, 65_535, 65_536, random.rand(3000)].sample(random: random)
    case random.rand(3)
    when 0 then Array.new(length) { random.rand(32..126).chr }.join.force_encoding(Encoding::UTF_8)
    when 1 then Array.new(length) { random.rand(256).chr }.join.b
    else Array.new(length / 3) { ["é", "漢", "\u{1F600}", "a"].sample(random: random) }.join.encode(Encoding::UTF_8)
    end
  end

  def random_options(random, index)
    options = {}
    options[:expires_in] = random.rand(1..10_000) if random.rand(2).zero?
    options[:race_condition_ttl] = 5 if options[:expires_in] && random.rand(2).zero?
    options[:version] = ["v#{index}", "é#{index}"].sample(random: random) if random.rand(2).zero?
    options[:tags] = Array.new(random.rand(1..3)) { |t| "tag-#{t}" } if random.rand(2).zero?
    options
  end

  def test_the_held_bytes_are_the_eager_encoders_for_random_values
    random = Random.new(Minitest.seed)
    memory = Larder::Stores::Memory.new
    store = cache(memory)
    60.times do |i|
      value = random_value(random)
      options = random_options(random, i)
      assert store.write("k#{i}", value, **options)
      item = memory.instance_variable_get(:@items)["k#{i}"]
      refute_nil item.head, "held as parts"
      assert_same item.value, item.view[1].value, "the value itself, not a copy"
      check_bytes(memory.get("k#{i}"), value, options)
      read = store.read("k#{i}", version: options[:version])
      assert_equal value, read
      assert_equal value.encoding == Encoding::BINARY ? Encoding::BINARY : Encoding::UTF_8, read.encoding
    end
  end

  def check_bytes(bytes, value, options)
    header = Larder::Header.read(bytes)
    assert_equal eager(value, header), bytes, "#{value.encoding}, #{value.bytesize} bytes, #{options}"
    options[:version] ? assert_equal(options[:version], header.version) : assert_nil(header.version)
    assert_equal options[:tags] || [], header.tags
    assert_equal options[:race_condition_ttl] ? 300_000 : 0, header.stale_ms
    assert_equal value.b, Larder.decode(bytes).value.b, "what every language reads"
  end

  def test_the_plain_string_head_is_the_head_template_and_the_messagepack_head
    random = Random.new(Minitest.seed)
    [0, 1, 31, 32, 255, 256, 65_535, 65_536, 70_000].each do |size|
      ["a" * size, ("b" * size).b].each do |text|
        times = [random.rand(2**64), [0, random.rand(2**64)].sample(random: random)]
        expected = Larder::Serializers.append_string_head(text, Larder::Header.value_head(*times, 0, nil, []))
        assert_equal expected, Larder::Header.plain_string_head(*times, text), "#{size} #{text.encoding}"
      end
    end
    assert_raises(ArgumentError) { Larder::Header.plain_string_head(-1, 0, "") }
    assert_raises(TypeError) { Larder::Header.plain_string_head(1.5, 0, "") }
  end

  def test_the_head_template_is_header_pack
    random = Random.new(Minitest.seed)
    200.times do
      fields = { created_at: random.rand(2**64), expires_at: [0, random.rand(2**64)].sample(random: random),
                 stale_ms: [0, random.rand(2**64)].sample(random: random),
                 version: [nil, "", "v1", "é" * random.rand(20)].sample(random: random),
                 tags: [[], ["a"], %w[a é b]].sample(random: random) }
      expected = Larder::Header.pack(kind: "value", serializer: "msgpack", compressor: "none", **fields)
      assert_equal expected, Larder::Header.value_head(*fields.values_at(:created_at, :expires_at, :stale_ms,
                                                                         :version, :tags))
    end
    assert_raises(ArgumentError) { Larder::Header.value_head(-1, 0, 0, nil, []) }
    assert_raises(ArgumentError) { Larder::Header.value_head(0, 2**64, 0, nil, []) }
    assert_raises(ArgumentError) { Larder::Header.value_head(0, 0, 0, "x" * 70_000, []) }
  end

  def test_reads_are_copies_and_the_callers_string_is_not_kept
    store = cache
    value = +"bar"
    store.write("k", value)
    value << "baz"
    assert_equal "bar", store.read("k")
    store.read("k") << "changed"
    assert_equal "bar", store.read("k")
    assert_equal({ "k" => "bar" }, store.read_multi("k"))
    store.read_multi("k")["k"] << "changed"
    store.write("h", { "a" => [1] })
    store.read_multi("h")["h"]["a"] << 2
    assert_equal({ "k" => "bar", "h" => { "a" => [1] } }, store.read_multi("k", "h"))
    assert_equal "bar", store.fetch("k") { raise "a hit" }
  end

  # The header's created_at is the clock ActiveSupport's Entry.new read (6.1 keeps it in @created_at), rounded to
  # ms; an entry without one (7.x's keep 0.0) has the clock read at the write.
  def test_the_created_at_is_the_entrys_clock_read_or_now
    store = cache
    entry = ActiveSupport::Cache::Entry.new("v", compress: false)
    entry.instance_variable_set(:@created_at, 1_700_000_000.1234)
    assert_equal 1_700_000_000_123, store.send(:created_ms, entry)
    entry.instance_variable_set(:@created_at, 0.0)
    assert_in_delta Larder.now_ms, store.send(:created_ms, entry), 1000
    store.write("k", "v")
    assert_in_delta Larder.now_ms, Larder::Header.read(store.larder.get("k")).created_at, 1000
  end

  def test_capacity_counts_the_parts_the_view_and_a_join
    memory = Larder::Stores::Memory.new
    store = cache(memory)
    store.write("k", "v" * 1000)
    item = memory.instance_variable_get(:@items)["k"]
    held = "k".bytesize + item.head.bytesize + 1000 + Larder::Stores::Memory::OVERHEAD +
           Larder::Stores::Memory::VIEW_OVERHEAD
    assert_equal held, memory.bytes
    memory.get("k") # joined: the entry's bytes are held beside the value the view holds
    assert_nil item.head
    assert_equal held + 1000, memory.bytes
    assert_equal "v" * 1000, store.read("k")
    store.delete("k")
    assert_equal 0, memory.bytes
  end

  def test_the_capacity_holds_with_parts
    small = Larder::Stores::Memory.new(capacity: 2400)
    tight = cache(small)
    assert tight.write("a", "a" * 1000)
    assert tight.write("b", "b" * 1000)
    assert_nil tight.read("a"), "evicted: a and b do not both fit with their views"
    assert_operator small.bytes, :<=, small.capacity
    refute tight.write("c", "c" * 4000), "larger than the store: refused (TooLarge), as a joined entry"
    assert_nil tight.read("c")
  end

  def test_purges_expiry_and_versions
    memory = Larder::Stores::Memory.new
    store = cache(memory)
    store.write("t", "tagged", tags: ["page"])
    store.write("u", "untagged")
    before = memory.bytes
    assert_equal 1, store.purge_tag("page")
    assert_nil store.read("t")
    assert_equal "untagged", store.read("u")
    assert_operator memory.bytes, :<, before
    assert_equal 1, memory.purge_prefix("u")

    store.write("v", "versioned", version: "2")
    assert_nil store.read("v", version: "1")
    assert_equal "versioned", store.read("v", version: "2")

    store.write("e", "expiring", expires_in: 0.4)
    assert_equal "expiring", store.read("e")
    sleep 0.5
    assert_nil store.read("e")
    assert_nil memory.get("e")
    store.write("p", "past", expires_at: Time.now - 1) if ActiveSupport::VERSION::MAJOR >= 7
    assert_nil memory.get("p")
  end

  def test_unless_exist_and_raw_bytes_operations
    memory = Larder::Stores::Memory.new
    store = cache(memory)
    assert store.write("k", "first")
    refute store.write("k", "second", unless_exist: true)
    assert_equal "first", store.read("k")
    assert store.write("n", "new", unless_exist: true)
    assert_equal "new", store.read("n")
    assert_raises(Larder::NotACounter) { memory.incr("k", 1) }
    refute memory.delete_if("k", "other")
    assert memory.delete_if("k", memory.get("k"))
    assert_nil store.read("k")
  end

  def test_another_reader_of_the_same_memory_reads_the_bytes
    memory = Larder::Stores::Memory.new
    writer = cache(memory)
    reader = cache(memory)
    writer.write("k", "shared", version: "3")
    assert_equal "shared", reader.read("k", version: "3")
    assert_equal({ "k" => "shared" }, reader.read_multi("k", version: "3"))
    assert_equal "shared", writer.read("k", version: "3")
    assert_equal "shared", Larder.decode(memory.get("k")).value
  end

  def test_what_is_not_held_as_parts
    memory = Larder::Stores::Memory.new
    items = memory.instance_variable_get(:@items)
    cache(memory).write("hash", { "a" => 1 })
    cache(memory, compress: true, compress_threshold: 10).write("compressed", "z" * 100)
    cache(memory, signing_secret: "s" * 64).write("latin1", "caf\xE9".dup.force_encoding(Encoding::ISO_8859_1))
    cache(memory, serializer: :json).write("json", "text")
    cache(memory).write("ascii", 12.to_s) # US-ASCII: read back as UTF-8, as from any other store
    assert_equal Encoding::UTF_8, cache(memory).read("ascii").encoding
    cache(memory).write("counter", 1, raw: true)
    %w[hash compressed latin1 json counter ascii].each { |key| assert_nil items[key]&.head, key }
    assert_equal "z" * 100, cache(memory, compress: true).read("compressed")
    assert_equal "text", cache(memory, serializer: :json).read("json")
  end
end
