# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/store_behaviour"
require "tmpdir"

# The SQLite store on a real file (spec/STORES.md §6).
class SqliteStoreTest < Minitest::Test
  include StoreBehaviour
  include KeySafety
  include StoreInterop

  def setup
    @dir = Dir.mktmpdir("larder-rb-sqlite-")
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
  end

  def store_url
    "sqlite://#{@dir}/cache.db"
  end

  def unreachable_url
    nil
  end

  def test_rows_follow_the_specs_table
    key = unique("row")
    data = entry("v", tags: %w[a b], ttl_ms: 60_000)
    store.set(key, data)
    db = SQLite3::Database.new("#{@dir}/cache.db")
    row = db.execute("SELECT key_hash, key, value, byte_size, expires_at FROM larder_entries WHERE key = ?", key).first
    assert_equal [Larder::Stores::Sql.key_hash(key), key, data, key.bytesize + data.bytesize,
                  Larder.decode(data).expires_at], row
    assert_equal %w[a b], db.execute("SELECT tag FROM larder_entries_tags WHERE key_hash = ? ORDER BY tag",
                                     row.first).flatten
    assert_equal [[1]], db.execute("SELECT version FROM larder_entries_schema")
  ensure
    db&.close
  end

  def test_a_newer_schema_is_refused
    store.set(unique("x"), entry(1))
    db = SQLite3::Database.new("#{@dir}/cache.db")
    db.execute("UPDATE larder_entries_schema SET version = 2")
    db.close
    error = assert_raises(Larder::StoreError) { Larder::Stores.open(store_url).get("x") }
    assert_includes error.message, "schema version 2"
  end
end

# The PostgreSQL store on a real server started for the tests, each test on its own table.
class PostgresStoreTest < Minitest::Test
  include StoreBehaviour
  include KeySafety
  include StoreInterop

  def store_url
    @store_url ||= "#{Servers.postgres}?table=t_#{name.downcase.gsub(/[^a-z0-9]/, '_')[0, 40]}_#{rand(1 << 20)}" \
                   "&timeout=5s&connect_timeout=5s"
  end

  def unreachable_url
    "postgres://larder@127.0.0.1:#{Servers.free_port}/x"
  end

  def test_a_dead_server_fails_fast_after_its_failures
    dead = Larder::Stores.open("postgres://larder@127.0.0.1:#{Servers.free_port}/x?failures=2&retry_after=60s")
    2.times { assert_raises(Larder::StoreError) { dead.get("x") } }
    error = assert_raises(Larder::StoreError) { dead.get("x") }
    assert_includes error.message, "ejected"
  ensure
    dead&.close
  end
end
