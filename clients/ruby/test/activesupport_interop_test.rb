# frozen_string_literal: true

require_relative "test_helper"
require "active_support/cache/larder_store"
require "open3"

# What Rails writes through ActiveSupport::Cache::LarderStore is a larder entry other languages read: the Rust binary
# (`larder store get KEY --store URL | larder inspect`) and the Python client (clients/python) on the same memcached;
# and what Rust writes, Rails reads.
class ActiveSupportInteropTest < Minitest::Test
  PYTHON = File.join(TestPaths::REPO, ".venv", "bin", "python")

  def setup
    @url = "memcached://#{Servers.shared_memcached}"
    @cache = ActiveSupport::Cache::LarderStore.new(@url, namespace: "app#{rand(1 << 30)}", compress_threshold: 64,
                                                         signing_secret: "interop-test-secret")
  end

  def teardown
    @cache.larder.close
  end

  def key(name)
    "#{@cache.options[:namespace]}:#{name}"
  end

  def rust(*args, stdin: nil)
    out, err, status = Open3.capture3(TestPaths.rust_bin, *args, stdin_data: stdin.to_s, binmode: true)
    assert status.success?, "larder #{args.join(' ')}: #{err}"
    out
  end

  def python(code, *args)
    raise "#{PYTHON} is missing: create it with `make services` / `make test` from the repository root" unless
      File.executable?(PYTHON)

    out, err, status = Open3.capture3(PYTHON, "-c", code, *args)
    assert status.success?, "python: #{err}"
    out
  end

  def test_rails_writes_rust_and_python_read
    user = { "id" => 7, "name" => "Ada", "roles" => %w[admin author], "bio" => "x" * 200 }
    assert @cache.write("user:7", user, expires_in: 60, version: "v3", tags: ["user:7"])
    stored = rust("store", "get", key("user:7"), "--store", @url)
    shown = rust("inspect", stdin: stored)
    assert_match(/^kind: +value$/, shown)
    assert_match(/^compressor: +lz4$/, shown, "above the 64-byte threshold")
    assert_match(/^version: +v3$/, shown)
    assert_match(/^tags: +user:7$/, shown)
    assert_includes shown, '"name":"Ada"'
    decoded = python(<<~PY, @url, key("user:7"))
      import json, sys, larder
      store = larder.open_store(sys.argv[1])
      entry = larder.decode(store.get(sys.argv[2]))
      print(json.dumps({"value": entry.value, "version": entry.version, "tags": list(entry.tags),
                        "ttl": entry.expires_at - entry.created_at, "compressor": entry.compressor}))
    PY
    assert_equal({ "value" => user, "version" => "v3", "tags" => ["user:7"], "compressor" => "lz4" },
                 JSON.parse(decoded).except("ttl"))
    assert_in_delta 60_000, JSON.parse(decoded)["ttl"], 1000
  end

  def test_a_ruby_only_value_is_an_ext_other_languages_refuse_to_misread
    @cache.write("sym", { a: :b })
    shown = rust("inspect", stdin: rust("store", "get", key("sym"), "--store", @url))
    assert_includes shown, '"$ext":101'
    assert_equal({ a: :b }, @cache.read("sym"))
  end

  def test_rust_writes_rails_reads
    tag = "t#{rand(1 << 30)}" # its own: a purge of a tag shared with other tests' entries would hide theirs
    entry = rust("encode", "--ttl", "60", "--version", "v1", "--tag", tag, stdin: '{"id":8,"tags":["a","b"]}')
    rust("store", "set", key("from-rust"), "--store", @url, stdin: entry)
    assert_equal({ "id" => 8, "tags" => %w[a b] }, @cache.read("from-rust", version: "v1"))
    assert_nil @cache.read("from-rust", version: "v2"), "another version is a miss"
    @cache.purge_tag(tag)
    assert_nil @cache.read("from-rust", version: "v1")
  end

  def test_python_writes_rails_reads
    python(<<~PY, @url, key("from-python"))
      import sys, larder
      store = larder.open_store(sys.argv[1])
      store.set(sys.argv[2], larder.encode({"lang": "python", "n": [1, 2.5, None]}, ttl_ms=60_000, compressor="zstd"))
    PY
    assert_equal({ "lang" => "python", "n" => [1, 2.5, nil] }, @cache.read("from-python"))
  end
end
