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
    # follows a link and takes a file for larder's only when it proves it. No link below the root is followed by
    # any operation ("Links are never followed below the root"): each shard directory is lstat'ed before it is used
    # (and made one level at a time, never with mkdir -p through a link), files are opened with O_NOFOLLOW, and a
    # name is deleted only while lstat still shows the file that was read or scanned. A link makes a read a miss, a
    # delete a no-op and a write an error, and is left as it is, with its target. (Ruby has no openat, so a link
    # swapped in between a check and its use is caught by the next check, not by the kernel as in Python and Rust.)
    # Files are created with `mode` (default 0600: a cache of private pages is its owner's alone), directories with
    # a search bit wherever the mode has a read bit.
    class File < Base
      BACKEND = "file"
      MAGIC = "LDR1".b.freeze
      HEADER = 14
      SWEEP_EVERY = 100
      DEFAULT_MODE = 0o600

      def self.from_url(url)
        raise UrlError, "#{url.redacted}: file:// takes no host" unless url.hosts.empty?
        raise UrlError, "#{url.redacted}: file:// needs a directory" if url.path.empty?

        mode = url.take("mode", nil)
        new(url.path, prefix: url.take("prefix", ""), capacity: url.take_size("capacity", nil),
                      mode: mode.nil? ? DEFAULT_MODE : parse_mode(url, mode))
      end

      # `mode=`: three or four octal digits of permission bits that let the owner read and write.
      def self.parse_mode(url, text)
        mode = text.match?(/\A[0-7]{3,4}\z/) ? text.to_i(8) : nil
        return mode if mode && mode <= 0o777 && (mode & 0o600) == 0o600

        raise UrlError, "#{url.redacted}: mode=#{text.inspect}: give three or four octal digits of permission bits " \
                        "that let the owner read and write, such as 0600 (the default) or 0640"
      end

      # The mode of the directories made for file mode `mode`: a search bit wherever there is a read bit.
      def self.dir_mode(mode)
        mode | ((mode & 0o444) >> 2)
      end

      def initialize(root, prefix: "", capacity: nil, mode: DEFAULT_MODE)
        super(prefix: prefix)
        unless mode.is_a?(Integer) && mode <= 0o777 && (mode & 0o600) == 0o600
          raise ArgumentError, "mode must be permission bits that let the owner read and write, not #{mode.inspect}"
        end

        @root = root
        @capacity = capacity
        @mode = mode
        @dir_mode = self.class.dir_mode(mode)
        @writes = 0
        FileUtils.mkdir_p(root, mode: @dir_mode)
      end

      def get(key)
        stored = stored_key(key)
        read(path_of(stored), stored)&.[](1)
      end

      def set(key, value, ttl: nil)
        stored = stored_key(key)
        expiry = Base.expiry_ms(value, ttl)
        if expiry && expiry <= Larder.now_ms
          remove(stored)
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
        key = check_key(key)
        stored = stored_of(key)
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
        # Nothing to delete (absent, or behind a link): no lock is taken, and no shard directory made.
        found = read(path_of(stored), stored)
        return false unless found && found[1] == expected.b

        locked(stored) do
          found = read(path_of(stored), stored)
          next false unless found && found[1] == expected.b

          unlink_own(path_of(stored), found[2])
        end
      end

      def delete(key)
        remove(stored_key(key))
      end

      def clear
        return purge_prefix("").then { nil } unless @keys.prefix.empty?

        FileScan.new(@root).files.each { |file| unlink_own(file.path, file.ino) }
        nil
      end

      def purge_prefix(prefix)
        stored_prefix = (@keys.prefix + check_prefix(prefix)).b
        FileScan.new(@root).files.count do |file|
          file.key.start_with?(stored_prefix) && unlink_own(file.path, file.ino)
        end
      end

      def purge_tag(tag)
        tag = check_tag(tag)
        FileScan.new(@root).files.count do |file|
          file.key.start_with?(@keys.prefix.b) && Base.entry_tags(file.value || "".b).include?(tag) &&
            unlink_own(file.path, file.ino)
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

      # [expires_at or nil, value, inode] of the file for `stored`, or nil: a missing file, a link (at the file or a
      # shard directory), anything but a regular file, another key, or an expired file (which is deleted).
      def read(path, stored)
        return nil unless FileScan.shard_dirs_real?(path)

        data, ino = ::File.open(path, ::File::RDONLY | ::File::NOFOLLOW | ::File::NONBLOCK) do |file|
          stat = file.stat
          next nil unless stat.file?

          [file.binmode.read, stat.ino]
        end
        return nil if data.nil? || data.bytesize < HEADER || data.byteslice(0, 4) != MAGIC

        expires_at, key_length = data.unpack("@4Q<S<")
        return nil if data.byteslice(HEADER, key_length) != stored.b

        if expires_at.positive? && expires_at <= Larder.now_ms
          unlink_own(path, ino)
          return nil
        end
        [expires_at.zero? ? nil : expires_at, data.byteslice(HEADER + key_length, data.bytesize), ino]
      rescue Errno::ENOENT, Errno::ENOTDIR, Errno::ELOOP, Errno::EISDIR, Errno::ENXIO
        nil
      end

      # Deletes the file of `stored` if it is this key's; whether it held a live value (a link is a no-op).
      def remove(stored)
        path = path_of(stored)
        found = read(path, stored)
        found ? unlink_own(path, found[2]) : false
      end

      def write(stored, value, expiry)
        path = path_of(stored)
        dir = shard_dir(path)
        if ::File.symlink?(path)
          raise StoreError.new(BACKEND, "#{path} is a symbolic link: the file store does not write through or " \
                                        "replace links")
        end

        temp = ::File.join(dir, ".#{::File.basename(path)}.#{SecureRandom.hex(6)}.tmp")
        key = stored.b
        flags = ::File::WRONLY | ::File::CREAT | ::File::EXCL | ::File::NOFOLLOW | ::File::BINARY
        ::File.open(temp, flags, @mode) do |file|
          file.write(MAGIC, [expiry || 0, key.bytesize].pack("Q<S<"), key, value.b)
        end
        ::File.rename(temp, path)
        sweep if @capacity && ((@writes += 1) % SWEEP_EVERY).zero?
      rescue SystemCallError => e
        FileUtils.rm_f(temp) if temp
        raise StoreError.new(BACKEND, "cannot write #{path}: #{e.message}")
      end

      # The shard directory of `path`. Each level is lstat'ed before it is used and made (with the directory mode)
      # when missing, one level at a time: a level that is a link, or not a directory, is an error, and nothing is
      # made behind it.
      def shard_dir(path)
        shard = ::File.dirname(path)
        FileUtils.mkdir_p(@root, mode: @dir_mode) unless ::File.directory?(@root)
        [::File.dirname(shard), shard].each { |dir| real_dir(dir) }
        shard
      end

      def real_dir(dir)
        stat = ::File.lstat(dir)
        return if stat.directory?

        raise StoreError.new(BACKEND, "#{dir} is a symbolic link or not a directory, on the way to the file of a " \
                                      "key: the file store does not follow links, and left it as it is")
      rescue Errno::ENOENT
        begin
          Dir.mkdir(dir, @dir_mode)
        rescue Errno::EEXIST
          nil
        end
        retry
      end

      # Deletes `path` if it is still the regular file `ino` under real shard directories (a read or a scan found it;
      # another process may have replaced it, or a shard directory, with a link since); whether it did.
      def unlink_own(path, ino)
        return false unless FileScan.shard_dirs_real?(path)

        stat = ::File.lstat(path)
        return false unless stat.file? && stat.ino == ino

        ::File.unlink(path)
        true
      rescue Errno::ENOENT, Errno::ENOTDIR
        false
      end

      def locked(stored, &block)
        dir = shard_dir(path_of(stored))
        flags = ::File::RDWR | ::File::CREAT | ::File::NOFOLLOW | ::File::NONBLOCK
        ::File.open(::File.join(dir, ".lock"), flags, @mode) do |lock|
          raise StoreError.new(BACKEND, "#{dir}/.lock is not a regular file: refused") unless lock.stat.file?

          lock.flock(::File::LOCK_EX)
          block.call
        end
      rescue Errno::ELOOP, Errno::ENXIO
        raise StoreError.new(BACKEND, "#{dir}/.lock is a link: refused")
      end

      # Keeps larder's files under the capacity, removing the oldest first (foreign files are not counted).
      def sweep
        files = FileScan.new(@root, values: false).files
        total = files.sum(&:bytes)
        return if total <= @capacity

        files.sort_by(&:modified).each do |file|
          break if total <= @capacity * 0.9

          total -= file.bytes if unlink_own(file.path, file.ino)
        end
      end
    end
  end
end
