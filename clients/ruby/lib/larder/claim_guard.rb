# frozen_string_literal: true

require "msgpack"
require_relative "errors"

module Larder
  # The msgpack gem's unpacker, fed so that no array32 or map32 count claimed by the input is read before it is
  # checked (issue 34). The gem allocates an array32's claimed length when it reads the head (4 billion elements in 5
  # bytes is a NoMemoryError); MsgpackReader used to walk, in Ruby, every payload holding a 0xDD or 0xDF byte, which
  # any float or string may hold: 15 ms of a 64 KiB query result's 17 ms read.
  #
  # Here the gem does the parsing. The payload is fed up to one byte past each 0xDD/0xDF byte. The gem keeps the bytes
  # of a head's fixed-size field in its buffer until the whole field is there, consumes a head byte as soon as it
  # reads it, and consumes str/bin/ext bodies as they come; so after a feed ending one byte past position i, its
  # buffer holds exactly one byte if and only if the byte at i is a head (an array32 or map32) waiting for its count.
  # The count is then read from the payload and added to the claims so far (an array's n elements, a map's 2n), which
  # can never exceed the payload's size in a well-formed payload (every object takes at least one byte): a payload
  # claiming more is refused before the gem reads that count. test/msgpack_fast_paths_test.rb checks the marker
  # detection against every container of random values.
  module ClaimGuard
    MARKERS = /[\xDD\xDF]/n

    module_function

    # The one object of `payload` (binary), read by `unpacker` (fresh). Raises InvalidEntry (kind bad_value).
    def unpack(payload, unpacker)
      size = payload.bytesize
      fed = 0
      claims = 0
      head = -1
      while (head = payload.index(MARKERS, head + 1)) && head + 2 <= size
        unpacker.feed_reference(payload.byteslice(fed, head + 2 - fed))
        fed = head + 2
        read = first(unpacker)
        return whole(read, unpacker, fed, size) if read
        next unless unpacker.buffer.size == 1

        claims += claim(payload, head)
        raise bad("a container claims more elements than the payload's #{size} bytes hold") if claims > size
      end
      unpacker.feed_reference(payload.byteslice(fed, size - fed)) if fed < size
      whole(first(unpacker), unpacker, size, size)
    end

    # [the first top-level object] once the unpacker has read a whole one from what it was fed; else nil.
    def first(unpacker)
      unpacker.each { |object| return [object] } # rubocop:disable Lint/UnreachableLoop -- the first object only
      nil
    end

    # The elements an array32 (n) or map32 (2n) at `head` claims; a count cut short claims the payload's size + 1.
    def claim(payload, head)
      return payload.bytesize + 1 if head + 5 > payload.bytesize

      count = payload.unpack1("N", offset: head + 1)
      payload.getbyte(head) == 0xDD ? count : 2 * count
    end

    # The object `read` (first's answer) holds once `fed` bytes of `size` were fed: a bad_value error for a payload
    # that ends early or trailing bytes.
    def whole(read, unpacker, fed, size)
      raise bad("payload ends early") if read.nil?
      raise bad("#{size - fed + unpacker.buffer.size} bytes after the value") if fed < size || !unpacker.buffer.empty?

      read.first
    end

    def bad(detail)
      InvalidEntry.new("bad_value", "msgpack: #{detail}")
    end
  end
end
