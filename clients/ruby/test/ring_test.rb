# frozen_string_literal: true

require_relative "test_helper"

# spec/vectors/ring.json (memcached's ketama ring) and stores.json (stored and internal keys).
class RingTest < Minitest::Test
  TestPaths.vectors("ring")["cases"].each do |vector|
    define_method("test_ring_#{vector['name']}") do
      all = vector["servers"].map { |s| [s["host"], s["port"], s["weight"]] }
      ejected = vector["ejected"] || []
      indexes = (0...all.size).reject { |i| ejected.include?(i) }
      ring = Larder::Ring.new(indexes.map { |i| all[i] }, indexes)
      assert_equal vector["points"], ring.points.size
      assert_equal vector["first_points"], ring.points.first(8)
      vector["keys"].each do |key|
        assert_equal key["hash"], Larder::Ring.hash(key["key"])
        assert_equal key["server"], ring.server(key["key"]), key["key"]
      end
    end
  end

  # Stored and internal keys; the refused and accepted keys are tried on every store by test/support/key_safety.rb,
  # and here on the rule itself.
  TestPaths.vectors("stores")["cases"].each_with_index do |vector, index|
    define_method("test_store_key_#{index}_#{vector['kind']}") do
      keys = Larder::Stores::Keys.new(vector["prefix"])
      case vector["kind"]
      when "stored" then assert_equal vector["stored_key"], keys.stored(vector["key"])
      when "internal" then assert_equal vector["stored_key"], keys.internal(vector["purpose"], vector["name"])
      when "refused" then refute_nil Larder::Keys.key_problem([vector["key_hex"]].pack("H*")), vector["name"]
      when "accepted"
        key = [vector["key_hex"]].pack("H*").force_encoding(Encoding::UTF_8)
        assert_nil Larder::Keys.key_problem(key), vector["name"]
        assert_equal key, Larder::Keys.safe_key(key), "an accepted key is its own safe key"
      else flunk "unknown kind #{vector['kind']}"
      end
    end
  end
end
