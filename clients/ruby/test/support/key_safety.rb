# frozen_string_literal: true

require_relative "../conformance/raw_probe"

# Keys at the store boundary (spec/STORES.md §2 Keys), for every store: the refused and accepted keys of
# spec/vectors/stores.json on every operation, and a seeded random walk of arbitrary byte strings as keys against
# the real server, which must leave every other key as it was and the connection answering. Included by each store's
# test class next to StoreBehaviour; `unreachable_url` names the same kind of store where nothing answers (nil for
# stores without a server), so that "refused before anything is sent" is what the test sees.
module KeySafety
  VECTORS = TestPaths.vectors("stores")["cases"]
  REFUSED = VECTORS.select { |c| c["kind"] == "refused" }.map { |c| [c["name"], [c["key_hex"]].pack("H*")] }
  ACCEPTED = VECTORS.select { |c| c["kind"] == "accepted" }.map do |c|
    [c["name"], [c["key_hex"]].pack("H*").force_encoding(Encoding::UTF_8)]
  end
  # Bytes the random keys are made of: mostly ones that break protocols.
  INTERESTING = ["\r", "\n", "\r\n", " ", "\t", "\0", "\x7F", "é", "✓", "\xFF", "\xC3", "{", "}", "*", "?", "[",
                 "\\", ":", "#", "mg", "ms innocent 6 T0 F0", "$6", "*1", "+OK", "-ERR", "VA 6", "HIJACK"].map(&:b)

  # Every operation that takes a key, on `key` (the batches with a good key `fine` before it).
  def key_operations(target, key, fine)
    {
      get: -> { target.get(key) },
      get_many: -> { target.get_many([fine, key]) },
      set: -> { target.set(key, entry("v")) },
      set_many: -> { target.set_many({ fine => entry("v"), key => entry("v") }) },
      add: -> { target.add(key, entry("v")) },
      incr: -> { target.incr(key, 1) },
      delete: -> { target.delete(key) },
      delete_many: -> { target.delete_many([fine, key]) },
      delete_if: -> { target.delete_if(key, "0123456789abcdef") }
    }
  end

  # The store the refusals are tried on: one whose server does not answer, where there is a server.
  def refusing_store
    url = unreachable_url
    url ? Larder::Stores.open(url) : store
  end

  def test_refused_keys_fail_every_operation_before_anything_is_sent
    target = refusing_store
    fine = unique("fine")
    REFUSED.each do |name, key|
      key_operations(target, key, fine).each do |operation, call|
        error = assert_raises(Larder::InvalidKey, "#{name}: #{operation}") { call.call }
        assert_equal "invalid_key", error.kind
        assert_kind_of Larder::StoreError, error
      end
      next if key.empty? # the empty prefix is every key: purge_prefix("") is allowed

      assert_raises(Larder::InvalidKey, "#{name}: purge_prefix") { target.purge_prefix(key) }
    end
    assert_equal(0, target.server_errors.values.sum, "nothing was sent") if target.respond_to?(:server_errors)
    assert_nil store.get(fine), "no batch wrote its good key"
  ensure
    target.close if target && !target.equal?(store)
  end

  def test_accepted_keys_at_the_edge_work
    ACCEPTED.each do |name, key|
      data = entry(name)
      store.set(key, data)
      assert_equal data, store.get(key), name
      assert_equal [data], store.get_many([key]), name
      assert store.delete(key), name
    end
  end

  # Issue 32, finding 1 (spec/STORES.md §2, "Wire bytes are the checked bytes"): a key is encoded once, as UTF-8,
  # checked on those bytes, and those bytes go to the wire. A Latin-1 or UTF-16 string is that text in UTF-8 (the
  # U+01xx characters whose low bytes are CR, LF and space become harmless two-byte sequences, never protocol), on
  # every operation; where the test can look at the server (`wire_value`: memcached, Redis, the file store's files)
  # the key is there as exactly those bytes. A string that is not valid in its encoding (a lone UTF-16 surrogate,
  # bytes that are not UTF-8) is refused by every operation.
  def test_keys_in_other_encodings_are_sent_as_their_utf8_bytes
    sentinel = entry(unique("sentinel"))
    store.set("innocent", sentinel)
    smuggler = -> { "\u010D\u010Ams\u0120innocent\u01200\u0120T0\u0120F0\u010D\u010A#{unique('tail')}" }
    [["k\u00e9-#{unique('latin1')}", Encoding::ISO_8859_1], [smuggler.call, Encoding::UTF_16LE],
     [smuggler.call, Encoding::UTF_16BE]].each do |text, encoding|
      key = text.encode(encoding)
      reads_and_writes_on_utf8_bytes(text, key, encoding)
      counters_and_batches_on_utf8_bytes(text, key, encoding)
      purges_by_utf8_text(text, encoding)
    end
    assert_equal sentinel, store.get("innocent"), "no command rode on a key"
  end

  def test_strings_invalid_in_their_encoding_are_refused_by_every_operation
    lone_high = "\x00\xD8k\x00".dup.force_encoding(Encoding::UTF_16LE)
    lone_low = "\xDC\x00".dup.force_encoding(Encoding::UTF_16BE)
    fine = unique("fine")
    [lone_high, lone_low, "\xE9t\xE9".b, "\xFFk".dup.force_encoding(Encoding::UTF_8)].each do |bad|
      key_operations(store, bad, fine).each do |operation, call|
        assert_raises(Larder::InvalidKey, "#{bad.inspect}: #{operation}") { call.call }
      end
      assert_raises(Larder::InvalidKey, bad.inspect) { store.purge_prefix(bad) }
      assert_raises(Larder::InvalidKey, bad.inspect) { store.purge_tag(bad) }
    end
    assert_nil store.get(fine), "no batch wrote its good key"
    fresh = unique("after")
    store.set(fresh, entry("still answering"))
    assert_equal "still answering", Larder.decode(store.get(fresh)).value
  end

  def test_random_keys_touch_no_other_key
    seed = Minitest.seed
    random = Random.new(seed)
    sentinels = ["innocent", "victim", unique("sentinel")].to_h { |key| [key, entry("sentinel #{unique(key)}")] }
    sentinels.each { |key, data| store.set(key, data) }
    200.times do |round|
      key = random_key(random)
      data = entry("value #{round}")
      if Larder::Keys.key_problem(key)
        assert_raises(Larder::InvalidKey, "seed #{seed} round #{round}: #{key.inspect}") { store.set(key, data) }
        assert_raises(Larder::InvalidKey) { store.get(key) }
      else
        store.set(key, data)
        assert_equal data, store.get(key), "seed #{seed} round #{round}: #{key.inspect}"
        store.delete(key)
      end
    end
    sentinels.each { |key, data| assert_equal data, store.get(key), "seed #{seed}: #{key} untouched" }
    fresh = unique("after")
    store.set(fresh, entry("still answering"))
    assert_equal "still answering", Larder.decode(store.get(fresh)).value
  end

  def test_random_keys_through_the_cache_are_made_safe
    seed = Minitest.seed
    random = Random.new(seed + 1)
    cache = Larder::Cache.new(store, namespace: unique("ns"))
    sentinel = entry(unique("sentinel"))
    store.set("innocent", sentinel)
    keys = Array.new(60) { random_key(random) }.uniq
    keys.each_with_index { |key, i| assert cache.write(key, i), "seed #{seed}: #{key.inspect}" }
    # Read after every write, so a key whose write landed on another key shows.
    keys.each_with_index { |key, i| assert_equal i, cache.read(key), "seed #{seed}: #{key.inspect}" } # rubocop:disable Style/CombinableLoops
    assert_equal sentinel, store.get("innocent")
    assert_equal 0, cache.stats[:store_errors]
  end

  private

  # What the server holds at `text`'s UTF-8 bytes, where the test can look (`wire_value`), else what the store reads.
  def at_wire_bytes(text)
    respond_to?(:wire_value, true) ? wire_value(text.encode(Encoding::UTF_8).b) : store.get(text)
  end

  # `key` (`text` in `encoding`) on the reads and writes, each checked through `text` in UTF-8 and, where the test
  # can look at the server, at its UTF-8 bytes there.
  def reads_and_writes_on_utf8_bytes(text, key, encoding)
    data = entry("in #{encoding}")
    store.set(key, data)
    assert_equal data, store.get(text), "#{encoding}: the key is its text in UTF-8"
    assert_equal data, at_wire_bytes(text), "#{encoding}: on the wire as its UTF-8"
    assert_equal [data], store.get_many([key])
    refute store.add(key, entry("again")), "#{encoding}: add finds the key set under its text"
    assert store.delete_if(key, data), encoding.to_s
    assert_nil at_wire_bytes(text), encoding.to_s
    assert store.add(key, data), encoding.to_s
    assert_equal data, at_wire_bytes(text), encoding.to_s
    assert store.delete(text.encode(Encoding::UTF_8))
  end

  def counters_and_batches_on_utf8_bytes(text, key, encoding)
    assert_equal 3, store.incr(key, 3), encoding.to_s
    assert_equal 5, store.incr(text, 2), encoding.to_s
    assert_equal "5", at_wire_bytes(text).strip, "#{encoding}: the counter at its UTF-8"
    assert store.delete(key)
    data = entry("in a batch")
    store.set_many({ key => data })
    assert_equal [data], store.get_many([text])
    assert_equal data, at_wire_bytes(text), encoding.to_s
    assert_equal 1, store.delete_many([key])
    assert_nil at_wire_bytes(text), encoding.to_s
  end

  # A tag and a prefix in `encoding` purge what their text in UTF-8 names.
  def purges_by_utf8_text(text, encoding)
    tagged = entry("tagged", tags: [text])
    store.set(text, tagged)
    assert_equal tagged, store.get(text.encode(encoding))
    store.purge_tag(text.encode(encoding))
    assert_nil store.get(text), "#{encoding}: purge_tag of the tag in #{encoding} is the tag's text"
    store.set(text, entry("prefixed"))
    store.purge_prefix(text[0..-2].encode(encoding))
    assert_nil store.get(text), "#{encoding}: purge_prefix of the prefix in #{encoding} is the prefix's text"
  end

  # A byte string of 0 to 300 bytes, built from protocol-breaking pieces, random bytes and plain text.
  def random_key(random)
    key = +"".b
    target = [0, 1, 5, 40, 249, 250, 251, 300].sample(random: random)
    while key.bytesize < target
      key << case random.rand(4)
             when 0 then INTERESTING.sample(random: random)
             when 1 then random.bytes(random.rand(1..4))
             else "k#{random.rand(1000)}".b
             end
    end
    key = key.byteslice(0, target) if random.rand(2).zero?
    random.rand(3).zero? ? key : key.force_encoding(Encoding::UTF_8)
  end
end
