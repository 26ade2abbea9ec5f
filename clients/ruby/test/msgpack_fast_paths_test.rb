# frozen_string_literal: true

# The shortcuts the write and read paths take for speed (issue 18) give exactly what the general paths give: a String
# value's entry is written as its MessagePack head and its own bytes (the msgpack gem's bytes, so entries stay
# byte-identical with every language), a payload that is one str or bin is read without the unpacker (same String,
# same encoding, same errors), and the checks the unpacker relies on (trailing bytes, array32/map32 claims) still
# hold around them.
require_relative "test_helper"
require "active_support/cache/larder_store"

class MsgpackFastPathsTest < Minitest::Test
  SIZES = [0, 1, 31, 32, 255, 256, 65_535, 65_536, 70_000].freeze

  def texts
    SIZES.flat_map do |size|
      ["a" * size, ("é" * ((size + 1) / 2)).byteslice(0, size & ~1), ("b" * size).b, ("c" * size).encode("US-ASCII")]
    end
  end

  def test_string_head_and_bytes_are_the_gems_bytes
    texts.each do |text|
      assert_equal MessagePack.pack(text), Larder::Serializers.string_head(text) + text.b,
                   "#{text.bytesize} bytes of #{text.encoding}"
    end
  end

  def test_an_entry_written_from_parts_is_the_entry_written_whole
    texts.each do |text|
      parts = Larder::RubyValues.dump_parts(text, signer: nil)
      %w[none lz4].each do |compressor|
        options = { compressor: compressor, created_at: 5, expires_at: 9, version: "v", tags: ["t"] }
        assert_equal Larder.encode(text, **options), Larder.encode_serialized(parts, serializer: "msgpack", **options)
      end
    end
  end

  def test_a_single_string_reads_as_the_unpacker_reads_it
    texts.each do |text|
      payload = MessagePack.pack(text)
      fast = Larder::Serializers.msgpack_value(payload)
      slow = MessagePack::DefaultFactory.unpacker.tap { |u| u.feed(payload) }.read
      assert_equal [slow, slow.encoding, false], [fast, fast.encoding, fast.frozen?]
      fast << "x" # the caller's copy: the payload is untouched
      assert_equal payload, MessagePack.pack(text)
    end
  end

  def test_a_string_cut_short_or_followed_by_bytes_is_bad_value
    ["\xA2a", "\xD9\x05abc", "\xDA\x00\x03ab", "\xC4\x02a", "\xC6\x00\x00\x00\x05abcd", "\xA1ab", "\xD9\x01ab",
     "\xC4\x01ab", "\xD9", "\xDB\x00\x00"].each do |bytes|
      error = assert_raises(Larder::InvalidEntry, bytes.inspect) { Larder::Serializers.msgpack_value(bytes.b) }
      assert_equal "bad_value", error.kind
    end
  end

  def test_huge_array32_and_map32_claims_are_refused_before_the_gem_sees_them
    ["\xDD\xFF\xFF\xFF\xFF", "\xDF\xFF\xFF\xFF\xFF", "\x91\xDD\xFF\xFF\xFF\xFF\x01", "\x81\xA1k\xDF\xFF\xFF\xFF\xF0"]
      .each do |bytes|
      error = assert_raises(Larder::InvalidEntry) { Larder::Serializers.msgpack_value(bytes.b) }
      assert_equal "bad_value", error.kind
    end
    # A str whose bytes hold 0xDD is one string, not a claim.
    assert_equal "\xDD\xDF".b, Larder::Serializers.msgpack_value(MessagePack.pack("\xDD\xDF".b))
    assert_equal [1, "\xDD".b], Larder::Serializers.msgpack_value(MessagePack.pack([1, "\xDD".b]))
  end

  # Larder::ClaimGuard finds the array32/map32 heads through the gem's own parsing: every value of random values
  # full of 0xDD/0xDF bytes (in strings, floats, integers, real array32s) reads back, and cut, extended or mutated
  # payloads are refused exactly when the walk it replaced (MsgpackReader.check_whole, then the gem) refused them.
  def random_value(random, depth = 0)
    case random.rand(depth > 3 ? 6 : 9)
    when 0 then random.rand * 1e6
    when 1 then random.rand(2**40) - (2**39)
    when 2 then random.bytes(random.rand(6)).b
    when 3 then nil
    when 4 then "\xDD\xDF".b * random.rand(3)
    when 5 then [0xDD, 0xDF, 0xDDDD, 0xDFDFDFDF][random.rand(4)]
    when 6 then Array.new(random.rand(5)) { random_value(random, depth + 1) }
    when 7 then Array.new(random.rand(5)) { [random.bytes(2), random_value(random, depth + 1)] }.to_h
    else random.rand(8).zero? ? Array.new(70_000, 1) : 1.5
    end
  end

  def reference_value(bytes)
    Larder::MsgpackReader.check_whole(bytes)
    MessagePack.unpack(bytes, allow_unknown_ext: true)
  rescue StandardError
    :refused
  end

  def test_the_claim_guard_reads_and_refuses_as_the_walk_it_replaced
    random = Random.new(34)
    1500.times do
      value = random_value(random)
      payload = MessagePack.pack(value)
      assert_equal [value], [Larder::Serializers.msgpack_value(payload)]
      mutated = payload.dup
      mutated.setbyte(random.rand(mutated.bytesize), [0xDD, 0xDF, random.rand(256)][random.rand(3)])
      [payload.byteslice(0, random.rand(payload.bytesize)), "#{payload}\x01".b, mutated].each do |bytes|
        mine = begin
          Larder::Serializers.msgpack_value(bytes)
        rescue Larder::InvalidEntry
          :refused
        end
        expected = reference_value(bytes)
        assert_equal [expected], [mine], bytes.unpack1("H*") unless expected.is_a?(Float) && expected.nan?
      end
    end
  end

  # ActiveSupport 6.1's Entry would Zlib-compress the value before LarderStore writes its own (LZ4) entry; the store
  # tells it not to, and still honours compress: for the larder entry.
  def test_the_activesupport_entry_is_not_compressed_on_the_way
    Dir.mktmpdir("larder-fast") do |root|
      cache = ActiveSupport::Cache::LarderStore.new(Larder::Stores::File.new(root))
      deflated = 0
      deflate = Zlib::Deflate.method(:deflate)
      Zlib::Deflate.stub(:deflate, ->(*args) { (deflated += 1) && deflate.call(*args) }) do
        cache.write("k", "y" * 4096)
        cache.write("k2", "y" * 4096, compress: true)
      end
      assert_equal 0, deflated
      assert_equal "lz4", Larder.decode(cache.larder.get("k")).compressor
      assert_equal "y" * 4096, cache.read("k2")
    end
  end
end
