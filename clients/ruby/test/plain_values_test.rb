# frozen_string_literal: true

# What LarderStore writes as plain MessagePack and what it writes as a signed Marshal value (Larder::RubyValues.plain?)
# is a contract: a value that would not come back as it went (a Symbol, a String in another encoding or not valid, a
# subclass, a Hash with a default or non-String keys, nesting past the limit) goes through Marshal. Issue 34 rewrote
# the walk for speed; these tests pin its answers against the walk it replaced (kept here as the oracle) on random
# values, and the reads of structured values from memory:// (decoded for each read, so already the caller's copy).
require_relative "test_helper"
require "active_support/cache/larder_store"

class PlainValuesTest < Minitest::Test
  class Sub < String; end
  class SubHash < Hash; end
  class SubArray < Array; end

  # The iterative walk plain? was before issue 34.
  def oracle(value)
    stack = [[value, 0]]
    until stack.empty?
      item, depth = stack.pop
      case item
      when nil, true, false, Float then next
      when Integer then return false unless Larder::RubyValues::INT_RANGE.cover?(item)
      when String then return false unless Larder::RubyValues.plain_string?(item)
      when Array
        return false if depth >= Larder::Serializers::MAX_NESTING || item.class != Array

        item.each { |child| stack.push([child, depth + 1]) }
      when Hash
        return false if depth >= Larder::Serializers::MAX_NESTING || item.class != Hash || item.default ||
                        item.default_proc

        item.each do |key, child|
          return false unless key.is_a?(String) && Larder::RubyValues.plain_string?(key)

          stack.push([child, depth + 1])
        end
      else return false
      end
    end
    true
  end

  def odd_leaf(random)
    [:sym, Sub.new("s"), "é".encode("ISO-8859-1"), "abc".encode("Windows-1252"), "\xFF".dup.force_encoding("UTF-8"),
     2**64, -(2**63) - 1, (2**64) - 1, -(2**63), Time.at(0), 1r, "a".encode("UTF-16LE"),
     "\x80".dup.force_encoding("US-ASCII"), "ok", "b".b, 1.5, nil, true, false, 7][random.rand(20)]
  end

  def odd_value(random, depth = 0)
    return odd_leaf(random) if depth > 3 || random.rand(3).zero?

    case random.rand(6)
    when 0 then Array.new(random.rand(4)) { odd_value(random, depth + 1) }
    when 1 then SubArray.new([1])
    when 2 then SubHash.new.merge!("a" => 1)
    when 3 then Hash.new(0).merge!("a" => 1)
    when 4 then { [1, "k", :k, 2, nil, Sub.new("k")][random.rand(6)] => odd_value(random, depth + 1) }
    else Array.new(random.rand(4)) { ["k#{random.rand(3)}", odd_value(random, depth + 1)] }.to_h
    end
  end

  def nested(depth)
    value = 1
    depth.times { |i| value = i.even? ? [value] : { "k" => value } }
    value
  end

  def test_plain_answers_as_the_walk_it_replaced
    random = Random.new(34)
    3000.times do
      value = odd_value(random)
      assert_equal oracle(value), Larder::RubyValues.plain?(value), value.inspect
    end
    [99, 100, 101, 150].each { |depth| assert_equal oracle(nested(depth)), Larder::RubyValues.plain?(nested(depth)) }
    shared = "k"
    rows = [{ shared => 1 }, { shared => :no }]
    refute Larder::RubyValues.plain?(rows), "a key seen before does not make its value plain"
    refute Larder::RubyValues.plain?([{ "k" => 1 }, { 1 => 1 }])
  end

  def test_values_that_are_not_plain_come_back_as_they_went
    store = ActiveSupport::Cache::LarderStore.new("memory://", signing_secret: "s" * 32)
    [{ "a" => :sym }, [Sub.new("x")], { 1 => "one" }, Hash.new(5).merge!("a" => 1), ["é".encode("ISO-8859-1")],
     { "rows" => [{ "id" => 1 }, { "id" => 2**70 }] }].each do |value|
      store.write("k", value)
      read = store.read("k")
      assert_equal value, read
      assert_equal Marshal.dump(value), Marshal.dump(read)
    end
  end

  def test_a_structured_read_from_memory_is_the_callers_own
    store = ActiveSupport::Cache::LarderStore.new("memory://")
    value = { "rows" => [{ "id" => 1, "name" => "a" }], "total" => 1 }
    store.write("k", value)
    first = store.read("k")
    first["rows"][0]["name"] << "changed"
    first["total"] = 2
    assert_equal value, store.read("k")
    refute_same store.read("k"), store.read("k")
    assert_equal value, store.fetch("k") { flunk "a hit" }
    many = store.read_multi("k", "k")
    many["k"]["rows"].clear
    assert_equal value, store.read_multi("k")["k"]
  end
end
