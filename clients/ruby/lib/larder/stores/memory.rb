# frozen_string_literal: true

module Larder
  module Stores
    # The process's own memory (`memory://?capacity=256M`): bounded by bytes (keys, values and a fixed overhead
    # per item), least recently used evicted first, thread-safe behind one mutex. Not shared between processes.
    class Memory < Base
      BACKEND = "memory"
      # Bytes counted per item beyond its key and value (the Hash slot, the Item, the String headers).
      OVERHEAD = 96

      # Bytes counted for a view kept beside an entry (get_view): the Array, the decoded object and its String header.
      VIEW_OVERHEAD = 160

      # expires_at: ms or nil; view: [owner, object] (get_view), or nil.
      Item = Struct.new(:value, :expires_at, :view)

      def self.from_url(url)
        raise UrlError, "memory:// takes no host or path" unless url.hosts.empty? && url.path.empty?

        new(capacity: url.take_size("capacity", 256 << 20), max_entries: url.take_integer("max_entries", nil))
      end

      attr_reader :capacity

      def initialize(capacity: 256 << 20, max_entries: nil)
        super(prefix: "")
        @capacity = capacity
        @max_entries = max_entries
        @items = {}
        @bytes = 0
        @mutex = Mutex.new
      end

      def get(key)
        check_key(key)
        @mutex.synchronize { live(key)&.value }
      end

      # What `owner` makes of the bytes at `key` (nil when missing): the block gets the bytes and answers
      # [object, keep]; a kept object is remembered beside these bytes, for this owner, until they are replaced,
      # expire or are evicted, and answered without calling the block again. A reader that decodes every entry it
      # reads (LarderStore) so decodes the bytes once, not on every read of the process's own memory, as
      # ActiveSupport's MemoryStore keeps objects rather than bytes. The block runs outside the lock; a view is
      # counted in the store's bytes (VIEW_OVERHEAD), so the capacity still holds.
      def get_view(key, owner)
        check_key(key)
        item = @mutex.synchronize { live(key) }
        return nil if item.nil?

        view = item.view
        return view[1] if view && view[0].equal?(owner)

        object, keep = yield item.value
        keep_view(key, item, [owner, object].freeze) if keep
        object
      end

      def get_many(keys)
        keys.each { |key| check_key(key) }
        @mutex.synchronize { keys.map { |key| live(key)&.value } }
      end

      def set(key, value, ttl: nil)
        check_key(key)
        expires_at = Base.expiry_ms(value, ttl)
        @mutex.synchronize do
          remove(key)
          store(key, value, expires_at) unless expires_at && expires_at <= Larder.now_ms
        end
        nil
      end

      def add(key, value, ttl: nil)
        check_key(key)
        expires_at = Base.expiry_ms(value, ttl)
        @mutex.synchronize do
          return false if live(key)
          return false if expires_at && expires_at <= Larder.now_ms

          store(key, value, expires_at)
          true
        end
      end

      def incr(key, delta, ttl: nil, create: true)
        check_key(key)
        @mutex.synchronize do
          item = live(key)
          if item.nil?
            return nil unless create

            store(key, delta.to_s, ttl && (Larder.now_ms + (ttl * 1000).ceil))
            return delta
          end
          value = Base.saturate(Base.counter_value(BACKEND, key, item.value) + delta)
          expires_at = item.expires_at
          remove(key)
          store(key, value.to_s, expires_at)
          value
        end
      end

      def delete_if(key, expected)
        check_key(key)
        @mutex.synchronize do
          item = live(key)
          return false unless item && item.value.b == expected.b

          remove(key)
          true
        end
      end

      def delete(key)
        check_key(key)
        @mutex.synchronize { !remove(key).nil? }
      end

      def clear
        @mutex.synchronize do
          @items.clear
          @bytes = 0
        end
        nil
      end

      def purge_prefix(prefix)
        check_prefix(prefix)
        @mutex.synchronize do
          doomed = @items.keys.select { |key| key.start_with?(prefix) }
          doomed.each { |key| remove(key) }
          doomed.size
        end
      end

      def purge_tag(tag)
        @mutex.synchronize do
          doomed = @items.select { |_, item| Base.entry_tags(item.value).include?(tag) }.keys
          doomed.each { |key| remove(key) }
          doomed.size
        end
      end

      def size
        @mutex.synchronize { @items.size }
      end

      def bytes
        @mutex.synchronize { @bytes }
      end

      private

      # The live item at `key`, marked most recently used; an expired one is removed.
      def live(key)
        item = @items.delete(key)
        return nil if item.nil?

        if item.expires_at && item.expires_at <= Larder.now_ms
          @bytes -= weight(key, item)
          return nil
        end
        @items[key] = item
      end

      def store(key, value, expires_at)
        value = value.b.freeze
        item = Item.new(value, expires_at)
        size = weight(key, item)
        if size > @capacity
          raise TooLarge.new(BACKEND, "value of #{value.bytesize} bytes at #{key} exceeds the store's " \
                                      "#{@capacity}-byte capacity")
        end

        @items[key] = item
        @bytes += size
        evict
      end

      def evict
        while @bytes > @capacity || (@max_entries && @items.size > @max_entries)
          key, item = @items.shift
          @bytes -= weight(key, item)
        end
      end

      def remove(key)
        item = @items.delete(key)
        @bytes -= weight(key, item) if item
        item
      end

      def weight(key, item)
        key.bytesize + item.value.bytesize + OVERHEAD + (item.view ? VIEW_OVERHEAD : 0)
      end

      # Attaches a view to the item still stored at `key` (a view made from replaced bytes is dropped).
      def keep_view(key, item, view)
        @mutex.synchronize do
          next unless @items[key].equal?(item)

          @bytes += VIEW_OVERHEAD unless item.view
          item.view = view
          evict
        end
      end
    end
  end
end
