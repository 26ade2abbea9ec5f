# frozen_string_literal: true

require "digest"
require "fileutils"
require "securerandom"

module Larder
  module Stores
    # A directory of files (`file:///var/cache/larder?capacity=10G`), per spec/STORES.md §7: one file per key at
    # `<root>/<h[0..2]>/<h[2..4]>/<h>` (h = hex SHA-256 of the stored key), a small header (magic, expiry, key) and
    # the value, written to a temporary file and renamed so readers see whole files; add, incr and delete_if hold
    # `flock` on the shard's `.lock`. Any number of processes may share the directory.
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
        read(path_of(@keys.stored(key)), @keys.stored(key))&.last
      end

      def set(key, value, ttl: nil)
        check_key(key)
        stored = @keys.stored(key)
        expiry = Base.expiry_ms(value, ttl)
        if expiry && expiry <= Larder.now_ms
          unlink(path_of(stored))
        else
          write(stored, value, expiry)
        end
        nil
      end

      def add(key, value, ttl: nil)
        check_key(key)
        stored = @keys.stored(key)
        expiry = Base.expiry_ms(value, ttl)
        return false if expiry && expiry <= Larder.now_ms

        locked(stored) do
          next false if read(path_of(stored), stored)

          write(stored, value, expiry)
          true
        end
      end

      def incr(key, delta, ttl: nil, create: true)
        stored = @keys.stored(key)
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
        stored = @keys.stored(key)
        locked(stored) do
          found = read(path_of(stored), stored)
          next false unless found && found.last == expected.b

          unlink(path_of(stored))
        end
      end

      def delete(key)
        stored = @keys.stored(key)
        return false unless read(path_of(stored), stored)

        unlink(path_of(stored))
      end

      def clear
        return purge_prefix("").then { nil } unless @keys.prefix.empty?

        each_file { |path, _| unlink(path) }
        nil
      end

      def purge_prefix(prefix)
        stored_prefix = @keys.prefix + prefix
        count = 0
        each_file { |path, key, _| count += 1 if key.start_with?(stored_prefix) && unlink(path) }
        count
      end

      def purge_tag(tag)
        count = 0
        each_file { |path, _, value| count += 1 if Base.entry_tags(value).include?(tag) && unlink(path) }
        count
      end

      private

      def path_of(stored)
        hash = Digest::SHA256.hexdigest(stored.b)
        ::File.join(@root, hash[0, 2], hash[2, 2], hash)
      end

      # [expires_at or nil, value] of the file for `stored`, or nil (an expired file is deleted).
      def read(path, stored)
        data = ::File.binread(path)
        return nil if data.bytesize < HEADER || data.byteslice(0, 4) != MAGIC

        expires_at, key_length = data.unpack("@4Q<S<")
        return nil if data.byteslice(HEADER, key_length) != stored.b

        if expires_at.positive? && expires_at <= Larder.now_ms
          unlink(path)
          return nil
        end
        [expires_at.zero? ? nil : expires_at, data.byteslice(HEADER + key_length, data.bytesize)]
      rescue Errno::ENOENT, Errno::ENOTDIR
        nil
      end

      def write(stored, value, expiry)
        path = path_of(stored)
        dir = ::File.dirname(path)
        FileUtils.mkdir_p(dir)
        temp = ::File.join(dir, ".#{::File.basename(path)}.#{SecureRandom.hex(6)}.tmp")
        key = stored.b
        ::File.binwrite(temp, MAGIC + [expiry || 0, key.bytesize].pack("Q<S<") + key + value.b)
        ::File.rename(temp, path)
        sweep if @capacity && ((@writes += 1) % SWEEP_EVERY).zero?
      rescue SystemCallError => e
        FileUtils.rm_f(temp) if temp
        raise StoreError.new(BACKEND, "cannot write #{path}: #{e.message}")
      end

      def unlink(path)
        ::File.unlink(path)
        true
      rescue Errno::ENOENT
        false
      end

      def locked(stored, &block)
        dir = ::File.dirname(path_of(stored))
        FileUtils.mkdir_p(dir)
        ::File.open(::File.join(dir, ".lock"), ::File::RDWR | ::File::CREAT, 0o644) do |lock|
          lock.flock(::File::LOCK_EX)
          block.call
        end
      end

      # Every file: path, stored key, value. Names starting with "." are skipped.
      def each_file
        Dir.glob(::File.join(@root, "*", "*", "*")).each do |path|
          next if ::File.basename(path).start_with?(".")

          data = ::File.binread(path)
          next if data.bytesize < HEADER || data.byteslice(0, 4) != MAGIC

          key_length = data.unpack1("@12S<")
          yield path, data.byteslice(HEADER, key_length).force_encoding(Encoding::UTF_8),
                data.byteslice(HEADER + key_length, data.bytesize)
        rescue Errno::ENOENT
          next
        end
      end

      # Keeps the directory under its capacity, removing the oldest files first.
      def sweep
        files = Dir.glob(::File.join(@root, "*", "*", "*")).reject { |p| ::File.basename(p).start_with?(".") }
        stats = files.filter_map { |p| [p, ::File.stat(p)] rescue nil } # rubocop:disable Style/RescueModifier
        total = stats.sum { |_, stat| stat.size }
        stats.sort_by { |_, stat| stat.mtime }.each do |path, stat|
          break if total <= @capacity

          total -= stat.size if unlink(path)
        end
      end
    end
  end
end
