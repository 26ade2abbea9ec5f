# frozen_string_literal: true

# LZ4 through the ffi gem (Larder::NativeLZ4, issue 18: a Fiddle call costs four times an ffi call) gives the same
# bytes as through Fiddle, each decodes the other's blocks, on both sides of the size above which the GVL is released,
# and a corrupt or cut block is refused the same way whichever path runs.
require_relative "test_helper"

class NativeLZ4Test < Minitest::Test
  SIZES = [1, 1023, 1024, 65_536, 65_537, 300_000].freeze

  def paths
    [Larder::NativeLZ4::ThroughFiddle, Larder::NativeLZ4.calls]
  end

  def test_ffi_is_the_path_when_the_gem_is_installed
    require "ffi"
    assert_equal Larder::NativeLZ4::ThroughFFI, Larder::NativeLZ4.calls
  end

  def test_both_paths_write_the_same_block_and_read_each_others
    SIZES.each do |size|
      text = Array.new(size) { |i| (((i * 7919) % 61) + 48).chr }.join.b
      blocks = paths.map { |path| compress(path, text) }
      assert_equal blocks[0], blocks[1], "#{size} bytes"
      paths.each do |path|
        out = "\0".b * size
        assert_equal size, path.decompress(blocks[0], out, blocks[0].bytesize, size)
        assert_equal text, out, "#{size} bytes through #{path}"
      end
    end
  end

  def test_a_cut_or_corrupt_block_is_refused_on_either_path
    text = ("<li>row</li>" * 200).b
    block = compress(Larder::NativeLZ4.calls, text)
    [block.byteslice(0, block.bytesize / 2), "\xFF".b * 40].each do |bad|
      paths.each do |path|
        assert_operator path.decompress(bad, "\0".b * text.bytesize, bad.bytesize, text.bytesize), :<, 0
      end
    end
    entry = [text.bytesize].pack("L<") + block.byteslice(0, block.bytesize - 3)
    error = assert_raises(Larder::InvalidEntry) { Larder::Compressors.decompress("lz4", entry) }
    assert_equal "corrupt_payload", error.kind
  end

  def test_the_compressor_round_trips_through_the_ffi_path
    SIZES.each do |size|
      text = ("<p>larder #{size}</p>" * ((size / 16) + 1)).b.byteslice(0, size)
      packed = Larder::Compressors.compress("lz4", text)
      assert_equal [size].pack("L<"), packed.byteslice(0, 4)
      assert_equal text, Larder::Compressors.decompress("lz4", packed)
    end
  end

  private

  def compress(path, text)
    bound = text.bytesize + (text.bytesize / 255) + 16
    out = "\0".b * bound
    written = path.compress(text, out, text.bytesize, bound)
    out.byteslice(0, written)
  end
end
