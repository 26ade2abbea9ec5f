# frozen_string_literal: true

require_relative "test_helper"

# Larder::Keys' helpers of spec/FORMAT.md §5.5 beyond what keys.json checks (its cases run in vectors_test.rb): the
# one set of names every language offers, selecting values over ordered header lines, url_keys, and Larder.purge(url:)
# removing exactly those keys.
class KeysTest < Minitest::Test
  BASE = "GET:http://shop.example/p"

  def test_keys_offers_the_helpers_of_format_5_and_nothing_else
    assert_equal %i[alternate_key http_key key_problem namespaced_key prefix_problem safe_key selecting_values
                    url_key url_keys variant_key], Larder::Keys.singleton_methods.sort
  end

  # Issue 32 (spec/STORES.md §2, "Wire bytes are the checked bytes"): a key in Latin-1 or UTF-16 gives the key its
  # text gives in UTF-8, as in every other language (before, a UTF-16 "\u4141" was the key "AA", its bytes, and a
  # namespaced one raised Encoding::CompatibilityError); a string not valid in its encoding is hashed on its bytes,
  # never read as UTF-8 (UTF-16LE D841 4180, a lone surrogate, is the bytes of "A\u0600A").
  def test_keys_in_other_encodings_are_their_utf8_text
    ["\u4141", "k\u00e9", "\u010D\u010Ams\u0120innocent", "x" * 300].each do |text|
      %w[ISO-8859-1 UTF-16LE UTF-16BE].each do |encoding|
        key = begin
          text.encode(encoding)
        rescue EncodingError
          next
        end
        assert_equal Larder::Keys.safe_key(text), Larder::Keys.safe_key(key), "#{text[0, 20]} in #{encoding}"
        assert_equal Larder::Keys.namespaced_key("app", text), Larder::Keys.namespaced_key("app", key)
        assert_equal Larder::Keys.namespaced_key(text, "k"), Larder::Keys.namespaced_key(key, "k")
      end
    end
    lone = "A\xD8\x80A".dup.force_encoding(Encoding::UTF_16LE)
    assert_match(/\AA#\h{64}\z/, Larder::Keys.safe_key(lone))
    assert_match(/\Aapp:A#\h{64}\z/, Larder::Keys.namespaced_key("app", lone))
  end

  def test_selecting_values_read_every_line_in_order_whatever_the_case
    lines = [%w[Accept-Language fr], %w[X-Other 1], ["ACCEPT-LANGUAGE", " de ,\ten "]]
    assert_equal "accept-language:fr,de,en\nx-device\u0000absent\n",
                 Larder::Keys.selecting_values(%w[accept-language x-device], lines)
    assert_equal "Accept-Language:fr,de,en\n", Larder::Keys.selecting_values(["Accept-Language"], lines),
                 "the name as the marker gives it, its lines found in any case"
    assert_equal "x:\n", Larder::Keys.selecting_values(["x"], [["x", ""]]), "empty is not absent"
    assert_equal "x:\u00e9\ufffd\n", Larder::Keys.selecting_values(["x"], [["x", "\u00e9\xff".b]]),
                 "bytes that are not UTF-8 read as U+FFFD, as Rust reads them"
  end

  def test_variant_key_with_and_without_a_generation
    lines = [%w[accept text/html]]
    with = Larder::Keys.variant_key(BASE, { "vary" => ["accept"], "generation" => "00ff" }, lines)
    assert_equal Larder::Keys.safe_key("#{BASE}\n\u0000generation:00ff\naccept:text/html\n"), with
    without = Larder::Keys.variant_key(BASE, { vary: ["accept"] }, lines)
    assert_equal Larder::Keys.safe_key("#{BASE}\naccept:text/html\n"), without, "Symbol keys work too"
    assert_raises(ArgumentError) { Larder::Keys.variant_key(BASE, {}, lines) }
  end

  def test_url_keys_are_the_base_and_its_four_alternates
    keys = Larder::Keys.url_keys(BASE)
    assert_equal [BASE] + %w[identity gzip br zstd].map { |coding| Larder::Keys.alternate_key(BASE, coding) }, keys
    assert_equal 5, keys.uniq.size
    error = assert_raises(ArgumentError) { Larder::Keys.alternate_key(BASE, "deflate") }
    assert_match(/identity, gzip, br, zstd/, error.message)
  end

  def test_a_url_purge_removes_the_url_keys_and_nothing_else
    store = Larder::Stores::Memory.new
    base = Larder::Keys.url_key("GET", "http://shop.example/p?b=2&a=1", namespace: "www")
    marker = { "vary" => ["accept"], "generation" => "01" }
    variant = Larder::Keys.variant_key(base, marker, [%w[accept */*]])
    (Larder::Keys.url_keys(base) + [variant, "www:GET:http://shop.example/q"]).each do |key|
      store.set(key, Larder.encode("x"))
    end
    Larder.purge(url: "http://shop.example/p?a=1&b=2", namespace: "www", store: store)
    assert_equal([nil] * 5, Larder::Keys.url_keys(base).map { |key| store.get(key) })
    refute_nil store.get("www:GET:http://shop.example/q")
    refute_nil store.get(variant), "a variant is unreachable once its marker is gone (FORMAT.md §5.4), not deleted"
  end
end
