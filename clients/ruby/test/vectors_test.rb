# frozen_string_literal: true

require_relative "test_helper"
require "base64"

# Every case of spec/vectors/entries.json, invalid.json and keys.json (stores.json and ring.json are in
# ring_test.rb and store_url_test.rb).
class VectorsTest < Minitest::Test
  ENTRIES = TestPaths.vectors("entries")["cases"]
  INVALID = TestPaths.vectors("invalid")["cases"]
  KEYS = TestPaths.vectors("keys")

  def self.header_bytes(part)
    part.is_a?(Hash) ? Base64.strict_decode64(part.fetch("$base64")) : part.b
  end

  def case_value(vector)
    case vector["options"]["serializer"]
    when "text" then vector["value_text"]
    when "raw" then Base64.strict_decode64(vector["value_base64"])
    else vector["value"]
    end
  end

  def case_response(vector)
    r = vector["response"]
    headers = r["headers"].map { |name, value| [self.class.header_bytes(name), self.class.header_bytes(value)] }
    Larder::HttpResponse.new(r["status"], headers, Base64.strict_decode64(r["body_base64"]), r["content_encoding"])
  end

  def expected_value(vector)
    vector["kind"] == "response" ? case_response(vector) : case_value(vector)
  end

  def assert_decodes(vector, data)
    entry = Larder.decode(data)
    options = vector["options"]
    assert_equal vector["kind"], entry.kind
    assert_equal options["serializer"], entry.serializer
    assert_equal vector["stored_compressor"], entry.compressor
    %w[created_at expires_at stale_ms version tags].each do |field|
      expected = options[field]
      expected.nil? ? assert_nil(entry[field]) : assert_equal(expected, entry[field], field)
    end
    expected = expected_value(vector)
    if vector["options"]["serializer"] == "raw"
      assert_equal expected.b, entry.value
    else
      assert_equal expected, entry.value
    end
  end

  def encode_case(vector)
    o = vector["options"]
    options = { compressor: o["compressor"], threshold: o["threshold"], level: o["level"],
                created_at: o["created_at"], expires_at: o["expires_at"], stale_ms: o["stale_ms"],
                version: o["version"], tags: o["tags"] }
    if vector["kind"] == "response"
      Larder.encode_response(case_response(vector), **options)
    else
      Larder.encode(case_value(vector), serializer: o["serializer"], **options)
    end
  end

  ENTRIES.each do |vector|
    define_method("test_entry_#{vector['name']}") do
      data = [vector["entry_hex"]].pack("H*")
      assert_decodes(vector, data)
      next if vector["decode_only"]

      encoded = encode_case(vector)
      assert_decodes(vector, encoded)
      assert_equal vector["entry_hex"], encoded.unpack1("H*") if vector["stored_compressor"] == "none"
    end
  end

  INVALID.each do |vector|
    define_method("test_invalid_#{vector['name']}") do
      data = [vector["entry_hex"]].pack("H*")
      options = vector["max_size"] ? { max_size: vector["max_size"] } : {}
      error = assert_raises(Larder::InvalidEntry) { Larder.decode(data, **options) }
      assert_equal vector["error"], error.kind, error.message
    end
  end

  KEYS["http"].each do |vector|
    define_method("test_http_key_#{vector['name']}") do
      drop = vector["drop"] || Larder::Keys::DEFAULT_DROP
      key = Larder::Keys.url_key(vector["method"], vector["url"], namespace: vector["namespace"] || "", drop: drop)
      assert_equal vector["key"], key
    end
  end

  KEYS["safe"].each do |vector|
    define_method("test_safe_key_#{vector['name']}") do
      assert_equal vector["safe"], Larder::Keys.safe_key(vector["key"])
    end
  end

  KEYS["namespaced"].each do |vector|
    define_method("test_namespaced_key_#{vector['name']}") do
      assert_equal vector["full"], Larder::Keys.namespaced_key(vector["namespace"], vector["key"])
    end
  end

  KEYS["variants"].each do |vector|
    define_method("test_variant_key_#{vector['name']}") do
      key = Larder::Keys.variant_key(vector["base_key"], vector["marker"], vector["request_headers"])
      assert_equal vector["variant_key"], key
    end
  end

  KEYS["alternates"].each do |vector|
    define_method("test_alternate_key_#{vector['name']}") do
      assert_equal vector["alternate_key"], Larder::Keys.alternate_key(vector["entry_key"], vector["coding"])
    end
  end
end
