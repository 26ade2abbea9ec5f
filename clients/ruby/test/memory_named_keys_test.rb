# frozen_string_literal: true

# memory:// looks an ActiveSupport key up as it is before making it safe (Memory#view_named, #put_named; issue 34):
# whatever the key, a write and a read land where Keys.safe_key puts them, as they did when every key was made safe
# first, and a key that safe_key changes never reaches another key's entry.
require_relative "test_helper"
require "active_support/cache/larder_store"

class MemoryNamedKeysTest < Minitest::Test
  KEYS = ["plain", "with space", "tab\there", "é", "é".b, "abc".b, "é".encode("ISO-8859-1"), "a" * 300,
          "#{'b' * 249}é", "ctrl\x01", "\xFF".b, "", "k:#{'x' * 240}"].freeze

  def test_every_key_lands_where_safe_key_puts_it
    memory = Larder::Stores::Memory.new
    store = ActiveSupport::Cache::LarderStore.new(memory)
    2.times do |round| # the second round writes every key again (held as it is) and reads it
      KEYS.each_with_index do |key, index|
        value = "v#{index}-#{round}"
        assert store.write(key, value), key.inspect
        assert_equal value, store.read(key), key.inspect
        next if key.empty? # a key the byte stores' own API refuses (check_key), which LarderStore still writes

        stored = Larder::Keys.safe_key(store.send(:normalize_key, key, {}))
        assert_equal value, Larder.decode(memory.get(stored)).value, "#{key.inspect} at #{stored.inspect}"
      end
    end
    assert_equal memory.size, KEYS.map { |key| store.send(:normalize_key, key, {}) }
                                  .map { |key| Larder::Keys.safe_key(key) }.uniq.size
  end

  def test_a_key_safe_key_changes_does_not_read_the_entry_of_its_safe_form
    memory = Larder::Stores::Memory.new
    store = ActiveSupport::Cache::LarderStore.new(memory)
    unsafe = "with space"
    store.write(unsafe, "v")
    memory.set(unsafe.tr(" ", "_"), Larder.encode("other")) # an unrelated key a safe form could be confused with
    assert_equal "v", store.read(unsafe)
    assert_nil store.read("missing key")
    assert_nil store.read("missing")
  end
end
