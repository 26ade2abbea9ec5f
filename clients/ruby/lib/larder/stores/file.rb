# frozen_string_literal: true

require "digest"
require "fileutils"
require "securerandom"
require_relative "file_scan"

module Larder
  module Stores
    # A directory of files (`file:///var/cache/larder?capacity=10G`), per spec/STORES.md §7: one file per key at
    # `<root>/<h[0..2]>/<h[2..4]>/<h>` (h = hex SHA-256 of the stored key), a small header (magic, expiry, key) and
    # the value, written to a temporary file and renamed so readers see whole files; add, incr and delete_if hold
    # `flock` on the shard's `.lock`. Any number of processes may share the directory.
    #
    # It deletes only files it wrote (§7): scans (capacity, purges, clear, stats) go through FileScan, which never
    # follows a link and takes a file for larder's only when it proves it; reads open files with O_NOFOLLOW and
    # refuse shard directories that are links, so no writer of the directory can make larder read or delete a file
    # outside it.
    class File < Base
      BACKEND = "file"
      MAGIC = "LDR1".b.freeze
      HEADER = 14
      SWEEP_EVERY = 100

      def self.from_url(url)
        raise UrlError, "#{url.redacted}: file:// takes no host" unless url.hosts.empty?
        raise UrlError, "#{url.redacted}: file:// needs a directory" if url.path.empty?

        new(url.path, prefix: url.take("prefix", ""), capacity: url.take_size("capacity", nil))
      end

      def initialize(root, prefix: "", capacity: nil)
        super(prefix: prefix)
        @root = root
        @capacity = capacity
        @writes = 0
        FileUtils.mkdir_p(root)
      end

      def get(key)
        stored = stored_key(key)
        read(path_of(stored), stored)&.last
      end

      def set(key, value, ttl: nil)
        stored = stored_key(key)
        expiry = Base.expiry_ms(value, ttl)
        if expiry && expiry <= Larder.now_ms
          path = path_of(stored)
          unlink(path) if read(path, stored)
        else
          write(stored, value, expiry)
        end
        nil
      end

      def add(key, value, ttl: nil)
        stored = stored_key(key)
        expiry = Base.expiry_ms(value, ttl)
        return false if expiry && expiry <= Larder.now_ms

        locked(stored) do
          next false if read(path_of(stored), stored)

          write(stored, value, expiry)
          true
        end
      end

      def incr(key, delta, ttl: nil, create: true)
        stored = stored_key(key)
        locked(stored) do
          found = read(path_of(stored), stored)
          if found.nil?
            next nil unless create

            write(stored, delta.to_s, ttl && (Larder.now_ms + (ttl * 1000).ceil))
            next delta
          end
          expiry, raw = found
          value = Base.saturate(Base.counter_value(BACKEND, key, raw) + delta)
          write(stored, value.to_s, expiry)
          value
        end
      end

      def delete_if(key, expected)
        stored = stored_key(key)
        locked(stored) do
          found = read(path_of(stored), stored)
          next false unless found && found.last == expected.b

          unlink(path_of(stored))
        end
      end

      def delete(key)
        stored = stored_key(key)
        return false unless read(path_of(stored), stored)

        unlink(path_of(stored))
      end

      def clear
        return purge_prefix("").then { nil } unless @keys.prefix.empty?

        FileScan.new(@root).files.each { |file| unlink(file.path) }
        nil
      end

      def purge_prefix(prefix)
        stored_prefix = (@keys.prefix + check_prefix(prefix)).b
        FileScan.new(@root).files.count { |file| file.key.start_with?(stored_prefix) && unlink(file.path) }
      end

      def purge_tag(tag)
        FileScan.new(@root).files.count do |file|
          file.key.start_with?(@keys.prefix.b) && Base.entry_tags(file.value || "".b).include?(tag) &&
            unlink(file.path)
        end
      end

      # What the directory holds: larder's files and their bytes, and the other things under the root
      # (`foreign_files`: files, links and directories larder did not write, which it never touches).
      def stats
        scan = FileScan.new(@root)
        files = scan.files
        { files: files.size, bytes: files.sum(&:bytes), foreign_files: scan.foreign }
      end

      private

      def path_of(stored)
        hash = Digest::SHA256.hexdigest(stored.b)
        ::File.join(@root, hash[0, 2], hash[2, 2], hash)
      end

      # [expires_at or nil, value] of the file for `stored`, or nil: a missing file, a link (at the file or a shard
      # directory), another key, or an expired file (which is deleted).
      def read(path, stored)
        return nil unless FileScan.shard_dirs_real?(path)

        data = ::File.open(path, ::File::RDONLY | ::File::NOFOLLOW) do |file|
          next nil unless file.stat.file?

          file.binmode.read
        end
        return nil if data.nil? || data.bytesize < HEADER || data.byteslice(0, 4) != MAGIC

        expires_at, key_length = data.unpack("@4Q<S<")
        return nil if data.byteslice(HEADER, key_length) != stored.b

        if expires_at.positive? && expires_at <= Larder.now_ms
          unlink(path)
          return nil
        end
        [expires_at.zero? ? nil : expires_at, data.byteslice(HEADER + key_length, data.bytesize)]
      rescue Errno::ENOENT, Errno::ENOTDIR, Errno::ELOOP, Errno::EISDIR
        nil
      end

      def write(stored, value, expiry)
        path = path_of(stored)
        dir = shard_dir(path)
        temp = ::File.join(dir, ".#{::File.basename(path)}.#{SecureRandom.hex(6)}.tmp")
        key = stored.b
        flags = ::File::WRONLY | ::File::CREAT | ::File::EXCL | ::File::NOFOLLOW | ::File::BINARY
        ::File.open(temp, flags, 0o644) do |file|
          file.write(MAGIC, [expiry || 0, key.bytesize].pack("Q<S<"), key, value.b)
        end
        ::File.rename(temp, path)
        sweep if @capacity && ((@writes += 1) % SWEEP_EVERY).zero?
      rescue SystemCallError => e
        FileUtils.rm_f(temp) if temp
        raise StoreError.new(BACKEND, "cannot write #{path}: #{e.message}")
      end

      # The shard directory of `path`, made if missing; a shard directory that is a link is an error.
      def shard_dir(path)
        dir = ::File.dirname(path)
        FileUtils.mkdir_p(dir) unless ::File.directory?(dir)
        raise StoreError.new(BACKEND, "#{dir} or its parent is a link: refused") unless FileScan.shard_dirs_real?(path)

        dir
      end

      def unlink(path)
        ::File.unlink(path)
        true
      rescue Errno::ENOENT
        false
      end

      def locked(stored, &block)
        dir = shard_dir(path_of(stored))
        flags = ::File::RDWR | ::File::CREAT | ::File::NOFOLLOW
        ::File.open(::File.join(dir, ".lock"), flags, 0o644) do |lock|
          lock.flock(::File::LOCK_EX)
          block.call
        end
      rescue Errno::ELOOP
        raise StoreError.new(BACKEND, "#{dir}/.lock is a link: refused")
      end

      # Keeps larder's files under the capacity, removing the oldest first (foreign files are not counted).
      def sweep
        files = FileScan.new(@root, values: false).files
        total = files.sum(&:bytes)
        return if total <= @capacity

        files.sort_by(&:modified).each do |file|
          break if total <= @capacity * 0.9

          total -= file.bytes if unlink(file.path)
        end
      end
    end
  end
end
