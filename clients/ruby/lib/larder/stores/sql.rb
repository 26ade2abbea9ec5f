# frozen_string_literal: true

require "digest"
require_relative "remote"

module Larder
  module Stores
    # SQLite (`sqlite:///path/cache.db`) and PostgreSQL (`postgres://user@host:5432/db`), per spec/STORES.md §6: one
    # Solid-Cache-like table of entries keyed by the first 8 bytes of the stored key's SHA-256, a tag index, and a
    # schema version. The same statements on both databases (numbered placeholders, `ON CONFLICT` upserts), optimistic
    # counters, exact purges. One connection per store behind a mutex (the `pool` option is accepted for the URL).
    class Sql < Base
      BACKEND = "sql"
      SCHEMA_VERSION = 1
      TABLE_NAME = /\A[a-z0-9_]+\z/

      def self.from_url(url)
        prefix = url.take("prefix", "")
        table = url.take("table", "larder_entries")
        unless table.match?(TABLE_NAME)
          raise UrlError,
                "#{url.redacted}: table=#{table.inspect}: lowercase letters, digits and _ only"
        end

        if url.scheme == "sqlite"
          raise UrlError, "#{url.redacted}: sqlite:// takes no host" unless url.hosts.empty?

          if url.path.size < 2
            raise UrlError,
                  "#{url.redacted}: sqlite:// needs a file: sqlite:///var/lib/larder/cache.db"
          end

          new(SqliteDb.new(url.path), prefix: prefix, table: table)
        else
          raise UrlError, "#{url.redacted}: postgres:// takes one host" unless url.hosts.size == 1

          timeout = url.take_duration("timeout", 250)
          connect_timeout = url.take_duration("connect_timeout", 500)
          url.take_integer("pool", 8)
          failures = url.take_integer("failures", 2)
          retry_after = url.take_duration("retry_after", 1000)
          db = PostgresDb.new(url, timeout: timeout, connect_timeout: connect_timeout)
          new(db, prefix: prefix, table: table, health: Health.new(db.address, failures: failures,
                                                                               retry_after_ms: retry_after))
        end
      end

      def initialize(db, prefix: "", table: "larder_entries", health: nil)
        super(prefix: prefix)
        @db = db
        @entries = table
        @tags = "#{table}_tags"
        @schema = "#{table}_schema"
        @health = health
        @ready = false
        @mutex = Mutex.new
      end

      def backend
        @db.backend
      end

      def server_errors
        @health ? { @db.address => @health.errors } : {}
      end

      # First 8 bytes of SHA-256(stored key), as a big-endian signed integer.
      def self.key_hash(stored)
        Digest::SHA256.digest(stored.b).unpack1("q>")
      end

      def get(key)
        stored = stored_key(key)
        rows = run("SELECT value FROM #{@entries} WHERE key_hash = $1 AND key = $2 AND " \
                   "(expires_at IS NULL OR expires_at > $3)", [Sql.key_hash(stored), stored, Larder.now_ms])
        rows.first&.first
      end

      def set(key, value, ttl: nil)
        stored = stored_key(key)
        expiry = Base.expiry_ms(value, ttl)
        transaction do
          if expiry && expiry <= Larder.now_ms
            remove(stored)
          else
            upsert(stored, value, expiry, only_if_absent: false)
          end
        end
        nil
      end

      def add(key, value, ttl: nil)
        stored = stored_key(key)
        expiry = Base.expiry_ms(value, ttl)
        return false if expiry && expiry <= Larder.now_ms

        transaction { upsert(stored, value, expiry, only_if_absent: true) }
      end

      def incr(key, delta, ttl: nil, create: true)
        key = check_key(key)
        stored = stored_of(key)
        hash = Sql.key_hash(stored)
        100.times do
          row = run("SELECT value FROM #{@entries} WHERE key_hash = $1 AND key = $2 AND " \
                    "(expires_at IS NULL OR expires_at > $3)", [hash, stored, Larder.now_ms]).first
          if row.nil?
            return nil unless create

            expiry = ttl && (Larder.now_ms + (ttl * 1000).ceil)
            return delta if transaction { upsert(stored, delta.to_s, expiry, only_if_absent: true) }

            next
          end
          value = Base.saturate(Base.counter_value(backend, key, row.first) + delta)
          changed = run_count("UPDATE #{@entries} SET value = $1, byte_size = $2 WHERE key_hash = $3 AND value = $4",
                              [blob(value.to_s), stored.bytesize + value.to_s.bytesize, hash, blob(row.first)])
          return value if changed == 1
        end
        raise StoreError.new(backend, "incr of #{key} lost to other writers 100 times", server: @db.address)
      end

      def delete_if(key, expected)
        stored = stored_key(key)
        transaction do
          hash = Sql.key_hash(stored)
          changed = run_count("DELETE FROM #{@entries} WHERE key_hash = $1 AND key = $2 AND value = $3",
                              [hash, stored, blob(expected)])
          run("DELETE FROM #{@tags} WHERE key_hash = $1", [hash]) if changed.positive?
          changed.positive?
        end
      end

      def delete(key)
        stored = stored_key(key)
        transaction { remove(stored) }
      end

      def clear
        return purge_prefix("").then { nil } unless @keys.prefix.empty?

        transaction do
          run("DELETE FROM #{@entries}", [])
          run("DELETE FROM #{@tags}", [])
        end
        nil
      end

      def purge_tag(tag)
        tag = check_tag(tag)
        transaction do
          count = run_count("DELETE FROM #{@entries} WHERE key_hash IN (SELECT key_hash FROM #{@tags} WHERE tag = $1)",
                            [tag])
          run("DELETE FROM #{@tags} WHERE tag = $1", [tag])
          count
        end
      end

      def purge_prefix(prefix)
        stored_prefix = @keys.prefix + check_prefix(prefix)
        run_count("DELETE FROM #{@entries} WHERE substr(key, 1, $1) = $2", [stored_prefix.length, stored_prefix])
      end

      def close
        @db.close
      end

      private

      # Writes (or, with only_if_absent, adds) a row and its tags; true if it wrote. Inside a transaction.
      def upsert(stored, value, expiry, only_if_absent:)
        hash = Sql.key_hash(stored)
        now = Larder.now_ms
        condition = if only_if_absent
                      " WHERE #{@entries}.key <> excluded.key OR (#{@entries}.expires_at IS NOT NULL AND " \
                        "#{@entries}.expires_at <= #{now})"
                    else
                      ""
                    end
        changed = run_count("INSERT INTO #{@entries} (key_hash, key, value, byte_size, created_at, expires_at) " \
                            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key_hash) DO UPDATE SET " \
                            "key = excluded.key, value = excluded.value, byte_size = excluded.byte_size, " \
                            "created_at = excluded.created_at, " \
                            "expires_at = excluded.expires_at#{condition}",
                            [hash, stored, blob(value), stored.bytesize + value.bytesize, now, expiry])
        return false if changed.zero?

        run("DELETE FROM #{@tags} WHERE key_hash = $1", [hash])
        Base.entry_tags(value).uniq.each do |tag|
          run("INSERT INTO #{@tags} (tag, key_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING", [tag, hash])
        end
        sweep if rand(100).zero?
        true
      end

      def remove(stored)
        hash = Sql.key_hash(stored)
        changed = run_count("DELETE FROM #{@entries} WHERE key_hash = $1 AND key = $2", [hash, stored])
        run("DELETE FROM #{@tags} WHERE key_hash = $1", [hash])
        changed.positive?
      end

      def sweep
        run("DELETE FROM #{@entries} WHERE key_hash IN (SELECT key_hash FROM #{@entries} " \
            "WHERE expires_at IS NOT NULL " \
            "AND expires_at <= $1 LIMIT 1000)", [Larder.now_ms])
      end

      def blob(bytes)
        @db.blob(bytes)
      end

      def run(sql, params)
        guarded { @db.query(sql, params) }
      end

      def run_count(sql, params)
        guarded { @db.count(sql, params) }
      end

      def transaction(&)
        guarded { @db.transaction(&) }
      end

      # One request at a time on the connection; the schema is checked first; failures count against the server.
      def guarded
        return yield if @mutex.owned?

        @mutex.synchronize do
          admitted = @health.nil? || @health.admit
          unless admitted
            @health.refused
            raise StoreError.new(backend, "server ejected after repeated failures", server: @db.address)
          end
          begin
            prepare_schema unless @ready
            result = yield
            @health&.success
            result
          rescue *@db.class::CONNECTION_ERRORS => e
            @health&.failure
            @db.reset
            raise StoreError.new(backend, e.message.lines.first.to_s.strip, server: @db.address)
          ensure
            @health.probe_over if admitted == Health::PROBE
          end
        end
      end

      def prepare_schema
        text = @db.text_type
        [
          "CREATE TABLE IF NOT EXISTS #{@entries} (key_hash BIGINT PRIMARY KEY, key #{text} NOT NULL, " \
          "value #{@db.bytes_type} NOT NULL, byte_size INTEGER NOT NULL, created_at BIGINT NOT NULL, " \
          "expires_at BIGINT)",
          "CREATE INDEX IF NOT EXISTS #{@entries}_key ON #{@entries} (key)",
          "CREATE INDEX IF NOT EXISTS #{@entries}_expires_at ON #{@entries} (expires_at)",
          "CREATE TABLE IF NOT EXISTS #{@tags} (tag #{text} NOT NULL, key_hash BIGINT NOT NULL, " \
          "PRIMARY KEY (tag, key_hash))",
          "CREATE INDEX IF NOT EXISTS #{@tags}_key_hash ON #{@tags} (key_hash)",
          "CREATE TABLE IF NOT EXISTS #{@schema} (version INTEGER NOT NULL)"
        ].each { |sql| @db.query(sql, []) }
        versions = @db.query("SELECT version FROM #{@schema}", []).map { |row| row.first.to_i }
        if versions.empty?
          @db.query("INSERT INTO #{@schema} (version) VALUES ($1)", [SCHEMA_VERSION])
        elsif versions.max > SCHEMA_VERSION
          raise StoreError.new(backend, "table #{@entries} is at schema version #{versions.max}; this larder knows " \
                                        "version #{SCHEMA_VERSION} (upgrade larder)")
        end
        @ready = true
      end
    end

    # SQLite through the sqlite3 gem: WAL mode and a 5 s busy timeout, so several processes share the file.
    class SqliteDb
      CONNECTION_ERRORS = [].freeze
      attr_reader :address

      def initialize(path)
        require "sqlite3"
        @address = path
        @db = SQLite3::Database.new(path)
        @db.busy_timeout = 5000
        @db.execute("PRAGMA journal_mode=WAL")
      end

      def backend
        "sqlite"
      end

      def text_type
        "TEXT"
      end

      def bytes_type
        "BLOB"
      end

      def blob(bytes)
        SQLite3::Blob.new(bytes.b)
      end

      def query(sql, params)
        @db.execute(sql.gsub(/\$(\d+)/, '?\1'), params).map { |row| row.map { |v| v.is_a?(String) ? v.b : v } }
      end

      # Rows changed: total_changes, since changes() keeps the previous statement's count when an upsert does nothing.
      def count(sql, params)
        before = @db.total_changes
        query(sql, params)
        @db.total_changes - before
      end

      # The block's result (the gem's own transaction returns true).
      def transaction
        result = nil
        @db.transaction(:immediate) { result = yield }
        result
      end

      def reset; end

      def close
        @db.close
      end
    end

    # PostgreSQL through the pg gem: parameters and results in binary where they are bytes.
    class PostgresDb
      CONNECTION_ERRORS = [].freeze # set once pg is loaded
      attr_reader :address

      def initialize(url, timeout:, connect_timeout:)
        require "pg"
        self.class.send(:remove_const, :CONNECTION_ERRORS)
        self.class.const_set(:CONNECTION_ERRORS, [PG::ConnectionBad, PG::UnableToSend, PG::QueryCanceled].freeze)
        host = url.hosts.first
        @address = host.to_s
        @params = { host: host.host.delete_prefix("[").delete_suffix("]"), port: host.port, user: url.user,
                    password: url.password, dbname: url.path.delete_prefix("/").then { |d| d.empty? ? nil : d },
                    connect_timeout: [(connect_timeout / 1000.0).ceil, 1].max,
                    options: "-c statement_timeout=#{timeout}" }.compact
        @connection = nil
      end

      def backend
        "postgres"
      end

      def text_type
        'TEXT COLLATE "C"'
      end

      def bytes_type
        "BYTEA"
      end

      Binary = Struct.new(:bytes)

      def blob(bytes)
        Binary.new(bytes.b)
      end

      def query(sql, params)
        result = connection.exec_params(sql, encode(params))
        rows = result.values.each_with_index.map do |row, _|
          row.each_with_index.map do |value, column|
            result.ftype(column) == 17 && value ? connection.unescape_bytea(value).b : value
          end
        end
        result.clear
        rows
      end

      def count(sql, params)
        result = connection.exec_params(sql, encode(params))
        result.cmd_tuples
      ensure
        result&.clear
      end

      def transaction(&)
        connection.transaction(&)
      end

      def reset
        @connection&.close
      rescue StandardError
        nil
      ensure
        @connection = nil
      end

      def close
        reset
      end

      private

      def connection
        @connection ||= PG.connect(**@params).tap { |c| c.exec("SET client_min_messages TO warning") }
      end

      def encode(params)
        params.map do |param|
          case param
          when Binary then { value: param.bytes, type: 17, format: 1 }
          when nil then nil
          else param.to_s
          end
        end
      end
    end
  end
end
