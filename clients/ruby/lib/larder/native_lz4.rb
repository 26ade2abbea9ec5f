# frozen_string_literal: true

require_relative "native"

module Larder
  # LZ4's two calls (the default compressor, run on every write and read of a value of 1 KiB or more), through the
  # ffi gem when it is installed (Debian's ruby-ffi) and through Fiddle otherwise. Why: a Fiddle call converts each
  # String argument through Ruby method calls (Fiddle::Pointer[]), releases and retakes the GVL and stores errno
  # through Ruby (Fiddle.last_error=): about 25,000 instructions per call against about 6,000 through ffi
  # (callgrind, decompressing 1 KiB), more than the whole gap between a LarderStore read and a Dalli read at 1 KiB.
  #
  # Both take Strings as the C buffers (their bytes as they are; the output buffer is a fresh String the caller
  # allocated at its full size). Calls on inputs of up to BLOCKING_ABOVE bytes keep the GVL (LZ4 is done in
  # microseconds there, less than releasing it costs); larger ones release it, as Fiddle always does, so that other
  # threads run during a long compression.
  module NativeLZ4
    BLOCKING_ABOVE = 64 * 1024

    # Through Fiddle (Native): the fallback, and what the tests compare the ffi path with.
    module ThroughFiddle
      module_function

      def compress(src, dst, src_size, capacity)
        Native[:LZ4_compress_default].call(src, dst, src_size, capacity)
      end

      def decompress(src, dst, src_size, capacity)
        Native[:LZ4_decompress_safe].call(src, dst, src_size, capacity)
      end
    end

    begin
      require "ffi"
    rescue LoadError
      nil # no ffi gem: Fiddle
    end

    if defined?(::FFI::Library)
      # Through the ffi gem, the library opened on first use.
      module ThroughFFI
        extend ::FFI::Library

        @mutex = Mutex.new
        @attached = false

        class << self
          def compress(src, dst, src_size, capacity)
            attach unless @attached
            if src_size > BLOCKING_ABOVE
              lz4_compress_blocking(src, dst, src_size, capacity)
            else
              lz4_compress(src, dst, src_size, capacity)
            end
          end

          def decompress(src, dst, src_size, capacity)
            attach unless @attached
            if capacity > BLOCKING_ABOVE
              lz4_decompress_blocking(src, dst, src_size, capacity)
            else
              lz4_decompress(src, dst, src_size, capacity)
            end
          end

          private

          def attach
            @mutex.synchronize do
              return if @attached

              ffi_lib(Native.library_path(:lz4)) # a missing liblz4 raises MissingLibrary, naming its package
              args = %i[pointer pointer int int]
              attach_function :lz4_compress, :LZ4_compress_default, args, :int
              attach_function :lz4_decompress, :LZ4_decompress_safe, args, :int
              attach_function :lz4_compress_blocking, :LZ4_compress_default, args, :int, blocking: true
              attach_function :lz4_decompress_blocking, :LZ4_decompress_safe, args, :int, blocking: true
              @attached = true
            end
          end
        end
      end
    end

    # The path in use: ThroughFFI when the ffi gem loads, else ThroughFiddle.
    def self.calls
      defined?(ThroughFFI) ? ThroughFFI : ThroughFiddle
    end
  end
end
