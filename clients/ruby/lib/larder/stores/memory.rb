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
      # once, when it is stored (and when a view is attached or the parts are joined); key: the frozen key the Hash
      # holds it under, so that the LRU touch of a read (live) re-inserts it without the Hash copying the caller's key
      # (800 instructions a read).
      Item = Struct.new(:value, :expires_at, :view, :head, :weight, :key)

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
        key = check_key(key)
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
        key = check_key(key)
        view(key, owner, &)
      end

      # get_view for a key that Keys.safe_key made (LarderStore's): not checked again.
      def view(key, owner)
        found = @mutex.synchronize { lookup(key, owner) }
        found.instance_of?(Item) ? made(key, found, owner, yield(found.value)) : found
      end

      # `view` of a key not yet made safe (an ActiveSupport key): one held as it is, in UTF-8, is safe already, so
      # Keys.safe_key runs only for a key not found as it is (issue 34: 2,400 of a read's 35,000 instructions).
      # Every key held is a fixed point of Keys.safe_key (what safe_key or check_key let through), and a UTF-8
      # String equal to one has its bytes, so the answer is the one `view(Keys.safe_key(key), …)` gives.
      def view_named(key, owner, &)
        if key.encoding == Encoding::UTF_8
          found = @mutex.synchronize { lookup(key, owner) }
          return found.instance_of?(Item) ? made(key, found, owner, yield(found.value)) : found if found

          safe = Larder::Keys.safe_key(key)
          return nil if safe.equal?(key) # looked up already

          return view(safe, owner, &)
        end
        view(Larder::Keys.safe_key(key), owner, &)
      end

      # `view` of several keys that Keys.safe_key made, under one lock: the objects in the order of `keys` (nil
      # where missing). The block is called, outside the lock, for each entry that has no view of this owner yet.
      def views(keys, owner)
        found = @mutex.synchronize { keys.map { |key| lookup(key, owner) } }
        found.each_with_index do |item, index|
          found[index] = made(keys[index], item, owner, yield(item.value)) if item.instance_of?(Item)
        end
        found
      end

      def get_many(keys)
        keys = keys.map { |key| check_key(key) }
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
        item = Item.new(body, expires_at, view, head, key.bytesize + head.bytesize + body.bytesize + OVERHEAD +
                                                      VIEW_OVERHEAD)
        @mutex.synchronize { unless_exist ? add_item(key, item) : set_item(key, item) }
      end

      # put_parts with a key not yet made safe (an ActiveSupport key): as view_named, a UTF-8 key held as it is
      # (a value written again) is safe already, so Keys.safe_key runs only for a key not held.
      def put_named(key, head, body, expires_at, view, unless_exist = false) # rubocop:disable Style/OptionalBooleanParameter
        held = key.encoding == Encoding::UTF_8 && @mutex.synchronize { @items.key?(key) }
        key = Larder::Keys.safe_key(key) unless held
        put_parts(key, head, body, expires_at, view, unless_exist)
      end

      def set(key, value, ttl: nil)
        key = check_key(key)
        item = bare_item(key, value, Base.expiry_ms(value, ttl))
        @mutex.synchronize { set_item(key, item) }
        nil
      end

      def add(key, value, ttl: nil)
        key = check_key(key)
        item = bare_item(key, value, Base.expiry_ms(value, ttl))
        @mutex.synchronize { add_item(key, item) }
      end

      def incr(key, delta, ttl: nil, create: true)
        key = check_key(key)
        @mutex.synchronize do
          item = live(key)
          if item.nil?
            return nil unless create

            set_item(key, bare_item(key, delta.to_s, ttl && (Larder.now_ms + (ttl * 1000).ceil)))
            return delta
          end
          value = Base.saturate(Base.counter_value(BACKEND, key, bytes_of(item)) + delta)
          set_item(key, bare_item(key, value.to_s, item.expires_at))
          value
        end
      end

      def delete_if(key, expected)
        key = check_key(key)
        @mutex.synchronize do
          item = live(key)
          return false unless item && bytes_of(item).b == expected.b

          remove(key)
          true
        end
      end

      def delete(key)
        key = check_key(key)
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
        prefix = check_prefix(prefix)
        @mutex.synchronize do
          doomed = @items.keys.select { |key| key.start_with?(prefix) }
          doomed.each { |key| remove(key) }
          doomed.size
        end
      end

      def purge_tag(tag)
        tag = check_tag(tag)
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
        @items[item.key] = item
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

      # The item of an entry (or a counter) given as bytes: set, add and incr.
      def bare_item(key, value, expires_at)
        value = value.b.freeze
        Item.new(value, expires_at, nil, nil, key.bytesize + value.bytesize + OVERHEAD)
      end

      # Under the lock: `item` at `key` in place of what is there (nothing if it has expired already): true. Raises
      # TooLarge for an item beyond the capacity.
      def set_item(key, item)
        remove(key)
        expires_at = item.expires_at
        return true if expires_at && expires_at <= Larder.now_ms
        raise too_large(key, item.value.bytesize + (item.head&.bytesize || 0)) if item.weight > @capacity

        key = key.dup.freeze unless key.frozen? # what the Hash would keep, kept on the item for live
        item.key = key
        @items[key] = item
        @bytes += item.weight
        evict
        true
      end

      # Under the lock: `item` at `key` unless a live entry is there or it has expired already (false).
      def add_item(key, item)
        return false if live(key) || (item.expires_at && item.expires_at <= Larder.now_ms)

        set_item(key, item)
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

      # Under the lock, for view and views: what `owner` keeps beside the live item at `key`; else the item itself,
      # its bytes joined (they no longer change), for the block to decode outside the lock (an owner's object is
      # never an Item); nil when missing. A method, so that nothing `return`s out of the lock's block (such a return
      # unwinds through Mutex#synchronize: 600 more instructions a read, counted by callgrind).
      def lookup(key, owner)
        item = live(key)
        return nil if item.nil?

        view = item.view
        return view[1] if view && view[0].equal?(owner)

        bytes_of(item)
        item
      end

      # The object of a view block's answer [object, keep] for the item's bytes, kept beside them if it says so.
      def made(key, item, owner, (object, keep))
        keep_view(key, item, [owner, object].freeze) if keep
        object
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
