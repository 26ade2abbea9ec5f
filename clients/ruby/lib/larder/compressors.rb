# frozen_string_literal: true

require "zlib"
require_relative "errors"
require_relative "native"
require_relative "native_lz4"

module Larder
  # The compressors of spec/FORMAT.md §3, in the wire forms every language can read, each decoder bounded.
  #
  # A decoder never produces more than `max_size` bytes and never allocates according to a size field it has not
  # checked: the LZ4 prefix and the Snappy preamble are checked against `max_size` (and LZ4's largest possible ratio)
  # before anything is allocated, zstd must record its content size, and brotli and gzip are decoded incrementally
  # with an output limit. Every failure is an InvalidEntry of kind `too_large` or `corrupt_payload`.
  #
  # Only zlib (gzip) is built into Ruby; LZ4 (block format with a 4-byte size prefix, not the frame format), zstd,
  # Snappy (raw, not framed) and Brotli are the system libraries, called through Fiddle (see Native).
  module Compressors
    # Default maximum decompressed size: 64 MiB.
    DEFAULT_MAX_SIZE = 64 * 1024 * 1024
    # Levels used when none is given (spec/FORMAT.md §3); the other codecs have no level.
    DEFAULT_LEVELS = { "zstd" => 3, "brotli" => 4, "gzip" => 6 }.freeze
    # The most an LZ4 block can expand: each extra length byte adds at most 255 bytes of output.
    LZ4_MAX_RATIO = 255
    U32_MAX = 0xFFFF_FFFF
    VARINT_MAX_BYTES = 10
    SNAPPY_PREAMBLE_MAX_BYTES = 5
    ZSTD_MAX_LEVEL = 22
    # How much compressed input gzip is fed at a time, so that output past max_size is noticed early (deflate
    # expands at most ~1032x, so one slice yields at most ~260 KiB).
    GZIP_SLICE = 256
    BROTLI_CHUNK = 64 * 1024
    # One zero byte, repeated into the output buffers of the Fiddle calls.
    ZERO = "\0".b.freeze

    module_function

    # `data` compressed with the compressor called `name`, at `level` (nil = the codec's default).
    def compress(name, data, level = nil)
      data = data.b unless data.encoding == Encoding::BINARY
      level = DEFAULT_LEVELS[name] if level.nil?
      case name
      when "none" then data.dup
      when "lz4" then lz4_compress(data)
      when "snappy" then snappy_compress(data)
      when "zstd" then zstd_compress(data, [level || 3, ZSTD_MAX_LEVEL].min)
      when "brotli" then brotli_compress(data, (level || 4).clamp(0, 11))
      when "gzip" then gzip_compress(data, (level || 6).clamp(0, 9))
      else raise ArgumentError, "unknown compressor #{name.inspect}"
      end
    end

    # Decompresses `data`, refusing to produce more than `max_size` bytes. Raises only InvalidEntry (and
    # MissingLibrary when the codec's system library is absent).
    def decompress(name, data, max_size = DEFAULT_MAX_SIZE)
      data = data.b unless data.encoding == Encoding::BINARY
      case name
      when "none"
        check_size(data.bytesize, max_size)
        data
      when "lz4" then lz4_decompress(data, max_size)
      when "snappy" then snappy_decompress(data, max_size)
      when "zstd" then zstd_decompress(data, max_size)
      when "brotli" then brotli_decompress(data, max_size)
      when "gzip" then gzip_decompress(data, max_size)
      else raise ArgumentError, "unknown compressor #{name.inspect}"
      end
    end

    # Into Ruby Strings rather than Fiddle::Pointer buffers (a Fiddle call takes a String's bytes as they are), and
    # the bound computed here (LZ4_COMPRESSBOUND): no buffer to copy out, no finalizer per call.
    def lz4_compress(data)
      raise ArgumentError, "lz4 input of #{data.bytesize} bytes exceeds 2 GiB" if data.bytesize > 0x7E00_0000

      bound = data.bytesize + (data.bytesize / 255) + 16
      out = ZERO * bound
      written = NativeLZ4.calls.compress(data, out, data.bytesize, bound)
      raise ArgumentError, "lz4 compression failed" if written <= 0

      [data.bytesize].pack("L<") << out.byteslice(0, written)
    end

    def lz4_decompress(data, max_size)
      raise corrupt("lz4 payload of #{data.bytesize} bytes has no 4-byte size prefix") if data.bytesize < 4

      declared = data.unpack1("L<")
      check_size(declared, max_size)
      block = data.byteslice(4, data.bytesize - 4)
      if declared > (LZ4_MAX_RATIO * block.bytesize) + 16
        raise corrupt("lz4 size prefix claims #{declared} bytes from a #{block.bytesize}-byte block, more than LZ4 " \
                      "can expand")
      end
      out = ZERO * [declared, 1].max
      got = NativeLZ4.calls.decompress(block, out, block.bytesize, declared)
      raise corrupt("lz4: block does not decode") if got.negative?
      raise corrupt("lz4 block decoded to #{got} bytes, prefix declared #{declared}") if got != declared

      declared.zero? ? out.byteslice(0, 0) : out
    end

    def snappy_compress(data)
      bound = Native[:snappy_max_compressed_length].call(data.bytesize)
      out = Fiddle::Pointer.malloc(bound, Fiddle::RUBY_FREE)
      length = size_cell(bound)
      status = Native[:snappy_compress].call(data, data.bytesize, out, length)
      raise ArgumentError, "snappy compression failed (status #{status})" unless status.zero?

      out.to_s(read_size(length))
    end

    def snappy_decompress(data, max_size)
      declared, preamble_len = snappy_preamble(data)
      check_size(declared, max_size)
      if preamble_len > SNAPPY_PREAMBLE_MAX_BYTES
        raise corrupt("snappy length preamble of #{preamble_len} bytes (a raw block's takes at most 5)")
      end
      raise corrupt("snappy preamble claims #{declared} bytes, more than a raw block can hold") if declared > U32_MAX

      out = Fiddle::Pointer.malloc([declared, 1].max, Fiddle::RUBY_FREE)
      length = size_cell(declared)
      status = Native[:snappy_uncompress].call(data, data.bytesize, out, length)
      raise corrupt("snappy: block does not decode (status #{status})") unless status.zero?

      got = read_size(length)
      raise corrupt("snappy block decoded to #{got} bytes, preamble declared #{declared}") if got != declared

      out.to_s(declared)
    end

    # The uncompressed length a raw Snappy block starts with (a little-endian base-128 varint) and its length in
    # bytes, read as a u64 of at most 10 bytes so that any absurd length is reported as too large.
    def snappy_preamble(data)
      raise corrupt("snappy payload is empty") if data.empty?

      value = 0
      data.each_byte.with_index do |byte, i|
        raise corrupt("snappy length preamble is longer than #{VARINT_MAX_BYTES} bytes") if i == VARINT_MAX_BYTES

        value |= (byte & 0x7F) << (7 * i)
        return [value & Header::U64_MAX, i + 1] if byte < 0x80
      end
      raise corrupt("snappy length preamble is cut short")
    end

    def zstd_compress(data, level)
      bound = Native[:ZSTD_compressBound].call(data.bytesize)
      out = Fiddle::Pointer.malloc(bound, Fiddle::RUBY_FREE)
      written = Native[:ZSTD_compress].call(out, bound, data, data.bytesize, level)
      raise ArgumentError, "zstd compression failed" unless Native[:ZSTD_isError].call(written).zero?

      out.to_s(written)
    end

    def zstd_decompress(data, max_size)
      declared = Native[:ZSTD_getFrameContentSize].call(data, data.bytesize)
      raise corrupt("not a zstd frame") if declared == -2
      raise corrupt("zstd frame does not record its content size") if declared.negative?

      check_size(declared, max_size)
      frame = Native[:ZSTD_findFrameCompressedSize].call(data, data.bytesize)
      raise corrupt("zstd frame is truncated or malformed") unless Native[:ZSTD_isError].call(frame).zero?
      raise corrupt("#{data.bytesize - frame} bytes after the zstd frame") if frame != data.bytesize

      out = Fiddle::Pointer.malloc([declared, 1].max, Fiddle::RUBY_FREE)
      got = Native[:ZSTD_decompress].call(out, declared, data, data.bytesize)
      raise corrupt("zstd: frame does not decode") unless Native[:ZSTD_isError].call(got).zero?
      raise corrupt("zstd frame decoded to #{got} bytes, header declared #{declared}") if got != declared

      out.to_s(declared)
    end

    def brotli_compress(data, quality)
      bound = Native[:BrotliEncoderMaxCompressedSize].call(data.bytesize)
      bound = data.bytesize + 1024 if bound.zero?
      out = Fiddle::Pointer.malloc(bound, Fiddle::RUBY_FREE)
      length = size_cell(bound)
      ok = Native[:BrotliEncoderCompress].call(quality, 22, 0, data.bytesize, data, length, out)
      raise ArgumentError, "brotli compression failed" if ok.zero?

      out.to_s(read_size(length))
    end

    # Decodes a brotli stream chunk by chunk, stopping as soon as the output passes max_size.
    def brotli_decompress(data, max_size)
      state = Native[:BrotliDecoderCreateInstance].call(nil, nil, nil)
      raise corrupt("brotli: cannot create a decoder") if state.null?

      begin
        brotli_stream(state, data, max_size)
      ensure
        Native[:BrotliDecoderDestroyInstance].call(state)
      end
    end

    def brotli_stream(state, data, max_size)
      input = Fiddle::Pointer[data]
      available_in = size_cell(data.bytesize)
      next_in = pointer_cell(input.to_i)
      chunk = Fiddle::Pointer.malloc(BROTLI_CHUNK, Fiddle::RUBY_FREE)
      available_out = size_cell(0)
      next_out = pointer_cell(0)
      output = String.new(encoding: Encoding::BINARY)
      loop do
        write_size(available_out, BROTLI_CHUNK)
        next_out[0, Fiddle::SIZEOF_VOIDP] = [chunk.to_i].pack("J")
        result = Native[:BrotliDecoderDecompressStream].call(state, available_in, next_in, available_out, next_out,
                                                             nil)
        output << chunk.to_s(BROTLI_CHUNK - read_size(available_out))
        raise too_large("brotli", max_size) if output.bytesize > max_size

        case result
        when 1
          raise corrupt("#{read_size(available_in)} bytes after the brotli stream") unless read_size(available_in).zero?

          return output
        when 2 then raise corrupt("brotli stream is truncated")
        when 3 then next
        else raise corrupt("brotli: stream does not decode")
        end
      end
    end

    def gzip_compress(data, level)
      deflate = Zlib::Deflate.new(level, Zlib::MAX_WBITS + 16)
      out = deflate.deflate(data, Zlib::FINISH)
      deflate.close
      out
    end

    # Decodes one gzip member, feeding it a slice at a time so that output past max_size stops the work early.
    def gzip_decompress(data, max_size)
      inflate = Zlib::Inflate.new(Zlib::MAX_WBITS + 16)
      output = String.new(encoding: Encoding::BINARY)
      offset = 0
      while offset < data.bytesize && !inflate.finished?
        output << inflate.inflate(data.byteslice(offset, GZIP_SLICE))
        offset += GZIP_SLICE
        raise too_large("gzip", max_size) if output.bytesize > max_size
      end
      raise corrupt("gzip member is truncated") unless inflate.finished?
      if inflate.total_in != data.bytesize
        raise corrupt("#{data.bytesize - inflate.total_in} bytes after the gzip member")
      end

      output
    rescue Zlib::Error => e
      raise corrupt("gzip: #{e.message}")
    ensure
      inflate&.close
    end

    def size_cell(value)
      cell = Fiddle::Pointer.malloc(Fiddle::SIZEOF_SIZE_T, Fiddle::RUBY_FREE)
      write_size(cell, value)
      cell
    end

    def pointer_cell(address)
      cell = Fiddle::Pointer.malloc(Fiddle::SIZEOF_VOIDP, Fiddle::RUBY_FREE)
      cell[0, Fiddle::SIZEOF_VOIDP] = [address].pack("J")
      cell
    end

    def write_size(cell, value)
      cell[0, Fiddle::SIZEOF_SIZE_T] = [value].pack("J")
    end

    def read_size(cell)
      cell[0, Fiddle::SIZEOF_SIZE_T].unpack1("J")
    end

    def check_size(size, max_size)
      return unless size > max_size

      raise InvalidEntry.new("too_large",
                             "payload of #{size} bytes exceeds the #{max_size}-byte limit")
    end

    def too_large(codec, max_size)
      InvalidEntry.new("too_large", "#{codec} payload decompresses to more than the #{max_size}-byte limit")
    end

    def corrupt(detail)
      InvalidEntry.new("corrupt_payload", detail)
    end
  end
end
