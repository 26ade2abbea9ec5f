# frozen_string_literal: true

module ActiveSupport
  module Cache
    # What a LarderStore on the process's own memory (Larder::Stores::Memory) does differently; LarderStore extends
    # such a store with it. ActiveSupport's MemoryStore keeps Ruby objects behind one lock and has no LocalCache in
    # front; larder's memory store keeps entries (spec/STORES.md §8), so that purges, expiry and capacity in bytes
    # work as in every language, but the common operations are done as directly as MemoryStore does them:
    #
    # - No LocalCache layer on reads, writes and deletes: an in-process store needs no second in-process cache in
    #   front of it. LocalCache still works as ActiveSupport documents it once it is asked for (`with_local_cache`,
    #   `middleware`): from then on this store's operations go through it. The store answers false to
    #   `respond_to?(:middleware)`, so Rails does not insert that middleware (as for MemoryStore, which has none).
    # - A write of a String hands the store the entry's head and the value itself (LarderStore#write_parts,
    #   Memory#put_parts) rather than an entry copied into a fresh buffer, and reads hand out copies of the
    #   ActiveSupport Entry kept beside it, as MemoryStore does.
    # - The key is made safe once (Keys.safe_key) and not checked again by the store (Memory#view, #put_parts).
    module LarderStoreMemory
      def with_local_cache(&)
        @local_cache_used = true
        super
      end

      def middleware
        @local_cache_used = true
        super
      end

      # false for :middleware (see above); the method itself still answers LocalCache's middleware.
      def respond_to?(name, include_all = false) # rubocop:disable Style/OptionalBooleanParameter -- Ruby's signature
        name.to_sym != :middleware && super
      end

      private

      def read_entry(key, **options)
        return super if @local_cache_used

        read_view(key)
      end

      # As read_multi_views, with the store's lock taken once for all the keys (Memory#views).
      def read_multi_entries(names, **options)
        return super if @local_cache_used

        keys = names.map { |name| larder_key(normalize_key(name, options)) }
        fresh = {}.compare_by_identity # the entries decoded for this call (not kept): the caller's own already
        entries = @larder.views(keys, self) do |raw|
          made = entry_view(raw)
          fresh[made[0]] = true unless made[1] || made[0].nil?
          made
        end
        results = {}
        names.each_with_index do |name, index|
          entry = entries[index]
          next if entry.nil? || entry.expired? || entry.mismatched?(normalize_version(name, options))

          value = entry.value
          # a copy, as read_view hands out (Entry#dup_value!: Strings dup'd, numbers and booleans as they are)
          results[name] = if fresh.key?(entry)
                            value
                          elsif value.is_a?(String)
                            value.dup
                          else
                            copy_of(entry)
                          end
        end
        results
      end

      def copy_of(entry)
        copy = entry.dup
        copy.dup_value!
        copy.value
      end

      # ActiveSupport's normalize_key, without merging the options again (namespace_key merges the store's options
      # into the call's, which a read or a write has merged already): the call's namespace if it gives one, else
      # the store's; a namespace that is a Proc is called; a key not in UTF-8 is taken as UTF-8.
      def normalize_key(key, options = nil)
        key = expanded_key(key)
        namespace = options&.key?(:namespace) ? options[:namespace] : @options[:namespace]
        key = key.dup.force_encoding(Encoding::UTF_8) if key && key.encoding != Encoding::UTF_8
        return key unless namespace # (no respond_to? on nil: 300 instructions a call)

        namespace = namespace.call if namespace.respond_to?(:call)
        namespace ? "#{namespace}:#{key}" : key
      end

      def write_entry(key, entry, **options)
        return super if @local_cache_used

        store_entry(key, entry, options)
      end

      def delete_entry(key, **options)
        return super if @local_cache_used

        @larder.delete(larder_key(key))
      end
    end
  end
end
