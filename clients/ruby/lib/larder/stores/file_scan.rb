# frozen_string_literal: true

require "digest"

module Larder
  module Stores
    # Finding the file store's own files (spec/STORES.md §7, "A file store deletes only files it wrote"). The
    # directory may hold an operator's other files, or links planted by anyone who can write to it; capacity
    # eviction, purges, `clear` and `stats` walk it, so the walk decides what larder may delete. It never follows a
    # symbolic link (lstat at every level, files opened with O_NOFOLLOW), and it calls a file larder's only when the
    # file proves it: a regular file at `<2 hex>/<2 hex>/<64 hex>` under directories named by the name's first four
    # digits, starting with `LDR1`, with a key length that fits, and a key whose SHA-256 is its name. Everything
    # else is *foreign*: counted, never touched. (Names starting with "." in shard directories, larder's temporary
    # files and locks, are neither.) Mirrors crates/store-file/src/scan.rs.
    class FileScan
      MAGIC = "LDR1".b.freeze
      HEADER = 14
      HEX2 = /\A[0-9a-f]{2}\z/
      HEX64 = /\A[0-9a-f]{64}\z/

      # One of larder's files: its path, size in bytes, modification time, stored key (binary), when asked for the
      # value (the bytes after the key), and its inode (a delete checks that the name still holds this file).
      OwnFile = Struct.new(:path, :bytes, :modified, :key, :value, :ino)

      attr_reader :files, :foreign

      # Whether the two shard directories above `path` (`<root>/<a>/<b>/<name>`) are real directories or absent,
      # never links: reads and writes go through them, so a link there would lead outside the root.
      def self.shard_dirs_real?(path)
        shard = ::File.dirname(path)
        [::File.dirname(shard), shard].all? do |dir|
          ::File.lstat(dir).directory?
        rescue Errno::ENOENT
          true
        end
      end

      # Walks `root`; `values: false` reads only each file's header and key.
      def initialize(root, values: true)
        @root = root
        @values = values
        @files = []
        @foreign = 0
        walk
      end

      private

      def walk
        entries(@root).each do |a|
          a_path = ::File.join(@root, a)
          next @foreign += 1 unless a.match?(HEX2) && directory?(a_path)

          entries(a_path).each do |b|
            next if b.start_with?(".")

            b_path = ::File.join(a_path, b)
            next @foreign += 1 unless b.match?(HEX2) && directory?(b_path)

            entries(b_path).each do |name|
              next if name.start_with?(".")

              own = own_file(::File.join(b_path, name), name, a, b)
              next if own == :gone

              own ? @files << own : @foreign += 1
            end
          end
        end
      end

      def entries(dir)
        Dir.children(dir)
      rescue SystemCallError
        []
      end

      def directory?(path)
        ::File.lstat(path).directory?
      rescue SystemCallError
        false
      end

      # The file at `path`, if its name and header prove it larder's, else nil (:gone when it was deleted meanwhile).
      def own_file(path, name, dir_a, dir_b)
        return nil unless name.match?(HEX64) && name[0, 2] == dir_a && name[2, 2] == dir_b

        ::File.open(path, ::File::RDONLY | ::File::NOFOLLOW | ::File::NONBLOCK | ::File::BINARY) do |file|
          file.binmode
          stat = file.stat
          next nil unless stat.file?

          head = file.read(HEADER)
          next nil unless head && head.bytesize == HEADER && head.byteslice(0, 4) == MAGIC

          key_length = head.unpack1("@12S<")
          next nil if HEADER + key_length > stat.size

          key = file.read(key_length) || "".b
          next nil unless key.bytesize == key_length && Digest::SHA256.hexdigest(key) == name

          OwnFile.new(path, stat.size, stat.mtime, key, @values ? file.read : nil, stat.ino)
        end
      rescue Errno::ENOENT
        :gone
      rescue SystemCallError, IOError
        nil
      end
    end
  end
end
