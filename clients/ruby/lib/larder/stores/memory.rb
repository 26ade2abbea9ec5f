# frozen_string_literal: true

module Larder
  module Stores
    # The process's own memory (`memory://?capacity=256M`): bounded by bytes (keys, values and a fixed overhead
    # per item), least recently used evicted first, thread-safe behind one mutex. Not shared between processes.
    #
    # Parts: the common write of a String value by LarderStore (`put_parts`) is held as its entry's head (header and
    # MessagePack head) and the value itself, not joined into a fresh buffer. Every way out as bytes (`get`,
    # `get_many`, `incr`, `delete_if`, another owner's `get_view`) gives the entry's exact bytes, joined the first
    # time and then held joined (the join counted in the store's bytes); `purge_tag` reads the tags from the head.
    class Memory < Base
      BACKEND = "memory"
      # Bytes counted per item beyond its key and value (the Hash slot, the Item, the String headers).
      OVERHEAD = 96

      # Bytes counted for a view kept beside an entry (get_view): the Array, the decoded object and its String header.
      VIEW_OVERHEAD = 160

      # value: the entry's bytes, or its body while `head` is set (put_parts: the entry is head + body); expires_at:
      # ms or nil; view: [owner, object] (get_view), or nil; weight: the bytes it counts for in the store, counted
      # once, when it is stored (and when a view is attached or the parts are joined).
      Item = Struct.new(:value, :expires_at, :view, :head, :weight)

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
        @mutex.synchronize do
          item = live(key)
          item && bytes_of(item)
        end
      end

      # What `owner` makes of the bytes at `key` (nil when missing): the block gets the bytes and answers
      # [object, keep]; a kept object is remembered beside these bytes, for this owner, until they are replaced,
      # expire or are evicted, and answered without calling the block again. A reader that decodes every entry it
      # reads (LarderStore) so decodes the bytes once, not on every read of the process's own memory, as
      # ActiveSupport's MemoryStore keeps objects rather than bytes. The block runs outside the lock; a view is
      # counted in the store's bytes (VIEW_OVERHEAD), so the capacity still holds.
      def get_view(key, owner, &)
        check_key(key)
        view(key, owner, &)
      end

      # get_view for a key that Keys.safe_key made (LarderStore's): not checked again.
      def view(key, owner)
        item = nil
        raw = @mutex.synchronize do
          item = live(key)
          return nil if item.nil?

          view = item.view
          return view[1] if view && view[0].equal?(owner)

          bytes_of(item)
        end
        object, keep = yield raw
        keep_view(key, item, [owner, object].freeze) if keep
        object
      end

      # `view` of several keys that Keys.safe_key made, under one lock: the objects in the order of `keys` (nil
      # where missing). The block is called, outside the lock, for each entry that has no view of this owner yet.
      def views(keys, owner)
        items = nil
        found = @mutex.synchronize do
          keys.each_with_index.map do |key, index|
            item = live(key)
            next nil if item.nil?

            view = item.view
            next view[1] if view && view[0].equal?(owner)

            (items ||= {})[index] = item
            bytes_of(item)
          end
        end
        items&.each do |index, item|
          object, keep = yield found[index]
          keep_view(keys[index], item, [owner, object].freeze) if keep
          found[index] = object
        end
        found
      end

      def get_many(keys)
        keys.each { |key| check_key(key) }
        @mutex.synchronize do
          keys.map do |key|
            item = live(key)
            item && bytes_of(item)
          end
        end
      end

      # `set(key, head + body)` without joining them, for a writer that knows what it stores (LarderStore): a key
      # Keys.safe_key made, `head` an entry's header and MessagePack head and `body` the frozen value whose bytes
      # follow it, `expires_at` the entry's hard expiry (ms, or nil for never), `view` the [owner, object] a reader
      # would make of those bytes (kept as long as the parts are). `unless_exist`: as `add` (false when a live
      # entry is there). Raises TooLarge as `set` does.
      def put_parts(key, head, body, expires_at, view, unless_exist = false) # rubocop:disable Style/OptionalBooleanParameter
        weight = key.bytesize + head.bytesize + body.bytesize + OVERHEAD + VIEW_OVERHEAD
        @mutex.synchronize do
          return false if unless_exist && live(key)

          remove(key) unless unless_exist
          return !unless_exist if expires_at && expires_at <= Larder.now_ms

          raise too_large(key, head.bytesize + body.bytesize) if weight > @capacity

          @items[key] = Item.new(body, expires_at, view, head, weight)
          @bytes += weight
          evict
        end
        true
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
          value = Base.saturate(Base.counter_value(BACKEND, key, bytes_of(item)) + delta)
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
          return false unless item && bytes_of(item).b == expected.b

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
          doomed = @items.select { |_, item| Base.entry_tags(item.head || item.value).include?(tag) }.keys
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
          @bytes -= item.weight
          return nil
        end
        @items[key] = item
      end

      # The entry's bytes of a live item (under the mutex): parts are joined once and then held joined, the join
      # counted in the store's bytes (the body stays held by the view made at the write).
      def bytes_of(item)
        head = item.head
        return item.value if head.nil?

        body = item.value
        joined = (head + body.b).freeze
        item.value = joined
        item.head = nil
        item.weight += body.bytesize
        @bytes += body.bytesize
        evict
        joined
      end

      def store(key, value, expires_at)
        value = value.b.freeze
        size = key.bytesize + value.bytesize + OVERHEAD
        raise too_large(key, value.bytesize) if size > @capacity

        @items[key] = Item.new(value, expires_at, nil, nil, size)
        @bytes += size
        evict
      end

      def too_large(key, bytesize)
        TooLarge.new(BACKEND, "value of #{bytesize} bytes at #{key} exceeds the store's #{@capacity}-byte capacity")
      end

      def evict
        while @bytes > @capacity || (@max_entries && @items.size > @max_entries)
          _, item = @items.shift
          @bytes -= item.weight
        end
      end

      def remove(key)
        item = @items.delete(key)
        @bytes -= item.weight if item
        item
      end

      # Attaches a view to the item still stored at `key` (a view made from replaced bytes is dropped).
      def keep_view(key, item, view)
        @mutex.synchronize do
          next unless @items[key].equal?(item)

          unless item.view
            item.weight += VIEW_OVERHEAD
            @bytes += VIEW_OVERHEAD
          end
          item.view = view
          evict
        end
      end
    end
  end
end
