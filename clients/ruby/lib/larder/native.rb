# frozen_string_literal: true

require "fiddle"

module Larder
  # The system compression libraries, reached through Fiddle (Ruby has only zlib built in, and Debian packages no
  # gem for LZ4, zstd, Snappy or Brotli). Each library is opened the first time a compressor needs it; a missing one
  # raises MissingLibrary naming the library and the Debian package that provides it.
  module Native
    # name => [candidate sonames, Debian package]
    LIBRARIES = {
      lz4: [%w[liblz4.so.1 liblz4.so], "liblz4-1"],
      zstd: [%w[libzstd.so.1 libzstd.so], "libzstd1"],
      snappy: [%w[libsnappy.so.1 libsnappy.so], "libsnappy1v5"],
      brotlienc: [%w[libbrotlienc.so.1 libbrotlienc.so], "libbrotli1"],
      brotlidec: [%w[libbrotlidec.so.1 libbrotlidec.so], "libbrotli1"]
    }.freeze

    I = Fiddle::TYPE_INT
    SZ = Fiddle::TYPE_SIZE_T
    P = Fiddle::TYPE_VOIDP
    ULL = Fiddle::TYPE_LONG_LONG

    # name => [library, return type, argument types]
    FUNCTIONS = {
      LZ4_compressBound: [:lz4, I, [I]],
      LZ4_compress_default: [:lz4, I, [P, P, I, I]],
      LZ4_decompress_safe: [:lz4, I, [P, P, I, I]],
      ZSTD_compressBound: [:zstd, SZ, [SZ]],
      ZSTD_compress: [:zstd, SZ, [P, SZ, P, SZ, I]],
      ZSTD_decompress: [:zstd, SZ, [P, SZ, P, SZ]],
      ZSTD_getFrameContentSize: [:zstd, ULL, [P, SZ]],
      ZSTD_findFrameCompressedSize: [:zstd, SZ, [P, SZ]],
      ZSTD_isError: [:zstd, I, [SZ]],
      snappy_max_compressed_length: [:snappy, SZ, [SZ]],
      snappy_compress: [:snappy, I, [P, SZ, P, P]],
      snappy_uncompress: [:snappy, I, [P, SZ, P, P]],
      BrotliEncoderMaxCompressedSize: [:brotlienc, SZ, [SZ]],
      BrotliEncoderCompress: [:brotlienc, I, [I, I, I, SZ, P, P, P]],
      BrotliDecoderCreateInstance: [:brotlidec, P, [P, P, P]],
      BrotliDecoderDestroyInstance: [:brotlidec, Fiddle::TYPE_VOID, [P]],
      BrotliDecoderDecompressStream: [:brotlidec, I, [P, P, P, P, P, P]]
    }.freeze

    @handles = {}
    @sonames = {}
    @functions = {}
    @mutex = Mutex.new

    class << self
      # The Fiddle::Function called `name`, loading its library on first use.
      def [](name)
        @functions[name] || @mutex.synchronize { @functions[name] ||= load_function(name) }
      end

      # Whether the library a compressor needs can be loaded.
      def available?(library)
        handle(library)
        true
      rescue MissingLibrary
        false
      end

      # The soname under which `library` was opened (for a second binding of the same library: NativeLZ4).
      def library_path(library)
        handle(library)
        @sonames[library]
      end

      private

      def load_function(name)
        library, ret, args = FUNCTIONS.fetch(name)
        Fiddle::Function.new(handle(library)[name.to_s], args, ret)
      end

      def handle(library)
        @handles[library] ||= open_library(library)
      end

      def open_library(library)
        sonames, package = LIBRARIES.fetch(library)
        errors = []
        sonames.each do |soname|
          opened = Fiddle.dlopen(soname)
          @sonames[library] = soname
          return opened
        rescue Fiddle::DLError => e
          errors << e.message
        end
        raise MissingLibrary, "cannot load #{sonames.first} (#{errors.first}); install the Debian package " \
                              "#{package} (apt-get install #{package})"
      end
    end
  end
end
