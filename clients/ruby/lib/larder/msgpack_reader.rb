# frozen_string_literal: true

require_relative "errors"

module Larder
  # A small MessagePack reader for the places where the msgpack gem loses information larder must keep, or would
  # trust the input too much.
  #
  # Displaying a value (spec/CLI.md) needs every map pair in order with duplicates, the exact bytes of every ext type
  # and strings whose bytes are not UTF-8. Reading an HTTP response (spec/FORMAT.md §4) needs to walk the array
  # element by element and to skip reserved elements of any type. And the msgpack gem allocates an array32's claimed
  # length before reading it (4 billion elements in 5 bytes is a NoMemoryError), so payloads that hold such markers
  # are first walked here. The reader does not recurse: its work list stands in for a stack, and since every object
  # takes at least one byte, no count claimed by the input can make it loop or allocate beyond what the input holds.
  class MsgpackReader
    # An extension object: its type code (-128..127) and its data.
    Ext = Struct.new(:code, :data)

    # A map (or JSON object) as its [key, value] pairs, in order, duplicate keys kept.
    class MapPairs < Array
      # For JSON.parse's object_class: each member is appended as a pair.
      def []=(key, value)
        push([key, value])
      end
    end

    # Deepest nesting of arrays and maps the reader accepts.
    MAX_DEPTH = 1024

    SCALARS = {
      0xCC => ["C", 1], 0xCD => ["n", 2], 0xCE => ["N", 4], 0xCF => ["Q>", 8],
      0xD0 => ["c", 1], 0xD1 => ["s>", 2], 0xD2 => ["l>", 4], 0xD3 => ["q>", 8],
      0xCA => ["g", 4], 0xCB => ["G", 8]
    }.freeze
    FIXEXT_SIZES = { 0xD4 => 1, 0xD5 => 2, 0xD6 => 4, 0xD7 => 8, 0xD8 => 16 }.freeze
    EXT_WIDTHS = { 0xC7 => 1, 0xC8 => 2, 0xC9 => 4 }.freeze

    attr_reader :pos

    def initialize(data, pos = 0)
      @data = data.b
      @pos = pos
    end

    def at_end?
      @pos == @data.bytesize
    end

    # The one object `payload` holds, as a tree of nil, true/false, Integer, Float, binary String (str and bin
    # alike), Ext, Array and MapPairs; trailing bytes are a bad_value error.
    def self.read_whole_tree(payload)
      reader = new(payload)
      tree = reader.read_tree
      raise bad("#{payload.bytesize - reader.pos} bytes after the value") unless reader.at_end?

      tree
    end

    # Checks that `payload` is exactly one well-formed object, without building it.
    def self.check_whole(payload)
      reader = new(payload)
      reader.skip
      raise bad("#{payload.bytesize - reader.pos} bytes after the value") unless reader.at_end?
    end

    def self.bad(detail)
      InvalidEntry.new("bad_value", "msgpack: #{detail}")
    end

    # The length of the array that starts here.
    def array_len(what)
      marker = read_marker(what)
      return marker & 0x0F if marker.between?(0x90, 0x9F)
      return uint_of(what, 2) if marker == 0xDC
      return uint_of(what, 4) if marker == 0xDD

      raise bad("#{what}: expected an array, found #{marker_name(marker)}")
    end

    # A non-negative integer, in any of MessagePack's integer forms.
    def uint(what)
      marker = read_marker(what)
      return marker if marker <= 0x7F
      raise bad("#{what}: expected an unsigned integer, found #{marker - 0x100}") if marker >= 0xE0

      if marker.between?(0xCC, 0xD3)
        fmt, size = SCALARS[marker]
        value = take(what, size).unpack1(fmt)
        raise bad("#{what}: expected an unsigned integer, found #{value}") if value.negative?

        return value
      end
      raise bad("#{what}: expected an unsigned integer, found #{marker_name(marker)}")
    end

    # The bytes of the bin or str that starts here.
    def bytes_or_str(what)
      marker = read_marker(what)
      size = str_size(marker, what) || bin_size(marker, what)
      raise bad("#{what}: expected bytes or a string, found #{marker_name(marker)}") if size.nil?

      take(what, size)
    end

    # The bytes of the bin that starts here.
    def bin(what)
      marker = read_marker(what)
      size = bin_size(marker, what)
      raise bad("#{what}: expected bin, found #{marker_name(marker)}") if size.nil?

      take(what, size)
    end

    # The bytes of the str that starts here.
    def str_bytes(what)
      marker = read_marker(what)
      size = str_size(marker, what)
      raise bad("#{what}: expected a string, found #{marker_name(marker)}") if size.nil?

      take(what, size)
    end

    # Steps over one whole object of any type, at any depth.
    def skip
      pending = 1
      while pending.positive?
        raise bad("payload ends early") if pending > @data.bytesize - @pos

        pending -= 1
        marker = read_marker("object")
        count, size = head(marker)
        pending += count
        take("object", size)
      end
    end

    # One whole object, as a tree (see read_whole_tree).
    def read_tree
      stack = [] # [container, remaining, pending key]
      result = nil
      loop do
        node, count = read_node(stack.size)
        if stack.empty?
          result = node
        else
          attach(stack.last, node)
        end
        if count.positive?
          raise bad("payload ends early") if count > @data.bytesize - @pos

          stack.push([node, count, NO_KEY])
          next
        end
        stack.pop while !stack.empty? && stack.last[1].zero?
        return result if stack.empty?
      end
    end

    NO_KEY = Object.new.freeze
    private_constant :NO_KEY

    private

    def attach(frame, node)
      frame[1] -= 1
      container = frame[0]
      if container.is_a?(MapPairs)
        if frame[2].equal?(NO_KEY)
          frame[2] = node
        else
          container.push([frame[2], node])
          frame[2] = NO_KEY
        end
      else
        container.push(node)
      end
    end

    def read_node(depth)
      marker = read_marker("value")
      return [marker, 0] if marker <= 0x7F
      return [marker - 0x100, 0] if marker >= 0xE0
      return [nil, 0] if marker == 0xC0
      return [false, 0] if marker == 0xC2
      return [true, 0] if marker == 0xC3

      if (scalar = SCALARS[marker])
        return [take("value", scalar[1]).unpack1(scalar[0]), 0]
      end

      count, size = head(marker)
      if [0xDC, 0xDD].include?(marker) || marker.between?(0x90, 0x9F)
        check_depth(depth)
        return [[], count]
      end
      if [0xDE, 0xDF].include?(marker) || marker.between?(0x80, 0x8F)
        check_depth(depth)
        return [MapPairs.new, count]
      end
      if FIXEXT_SIZES.key?(marker) || EXT_WIDTHS.key?(marker)
        body = take("ext", size)
        return [Ext.new(body.unpack1("c"), body.byteslice(1, body.bytesize - 1)), 0]
      end
      [take("value", size), 0]
    end

    # For the object whose marker was just read: [objects it contains, bytes of data that follow its head].
    def head(marker)
      return [0, 0] if marker <= 0x7F || marker >= 0xE0 || [0xC0, 0xC2, 0xC3].include?(marker)
      return [0, SCALARS[marker][1]] if SCALARS.key?(marker)
      return [marker & 0x0F, 0] if marker.between?(0x90, 0x9F)
      return [2 * (marker & 0x0F), 0] if marker.between?(0x80, 0x8F)

      case marker
      when 0xDC then [uint_of("array", 2), 0]
      when 0xDD then [uint_of("array", 4), 0]
      when 0xDE then [2 * uint_of("map", 2), 0]
      when 0xDF then [2 * uint_of("map", 4), 0]
      else
        return [0, 1 + FIXEXT_SIZES[marker]] if FIXEXT_SIZES.key?(marker)
        return [0, 1 + uint_of("ext", EXT_WIDTHS[marker])] if EXT_WIDTHS.key?(marker)

        size = str_size(marker, "value") || bin_size(marker, "value")
        raise bad("reserved marker 0xc1") if size.nil?

        [0, size]
      end
    end

    def str_size(marker, what)
      return marker & 0x1F if marker.between?(0xA0, 0xBF)

      { 0xD9 => 1, 0xDA => 2, 0xDB => 4 }[marker]&.then { |width| uint_of(what, width) }
    end

    def bin_size(marker, what)
      { 0xC4 => 1, 0xC5 => 2, 0xC6 => 4 }[marker]&.then { |width| uint_of(what, width) }
    end

    def check_depth(depth)
      raise bad("value nested more than #{MAX_DEPTH} deep") if depth >= MAX_DEPTH
    end

    def read_marker(what)
      raise bad("#{what}: payload ends early") if @pos >= @data.bytesize

      marker = @data.getbyte(@pos)
      @pos += 1
      marker
    end

    def uint_of(what, width)
      take(what, width).unpack1({ 1 => "C", 2 => "n", 4 => "N" }.fetch(width))
    end

    def take(what, count)
      raise bad("#{what}: payload ends early") if @pos + count > @data.bytesize

      chunk = @data.byteslice(@pos, count)
      @pos += count
      chunk
    end

    def marker_name(marker)
      format("marker %#04x", marker)
    end

    def bad(detail)
      self.class.bad(detail)
    end
  end
end
