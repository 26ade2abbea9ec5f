# frozen_string_literal: true

require "open3"
require "tmpdir"
require "fileutils"
require "stringio"
require "larder/stores"
require "larder/rack/page_cache"
require_relative "raw_probe"

module Conformance
  # The four hostile_*.json files (spec/vectors/README.md, "hostile_*.json: the attacks every language must hold
  # against"; issue 32): keys on the wire, which site a page is for, a hostile directory under the file store, and
  # every command against a hostile server. Each runs the gem's real code paths (stores opened from their URLs, the
  # Rack page cache); what reached a server or a directory is looked at by RawProbe, which never sees a key as a
  # String. hostile_keys.json and hostile_replies.json need servers, named by the environment when a case runs:
  # LARDER_CONFORMANCE_MEMCACHED, LARDER_CONFORMANCE_REDIS (servers the runner may flush) and LARDER_HOSTILE (the
  # larder-hostile binary); a case that lacks one fails, saying which.
  module Hostile
    REPO = File.expand_path("../../../..", __dir__)
    HOSTILE_TREE = File.join(REPO, "spec", "vectors", "hostile_tree.py")

    module_function

    # The variable's value, or the case fails naming it.
    def env(test, name)
      value = ENV.fetch(name, "")
      test.flunk("$#{name} is not set: the case needs it (spec/vectors/README.md, hostile_*.json)") if value.empty?
      value
    end

    def entry(document)
      [document.fetch("entry_hex")].pack("H*")
    end

    # `call`'s result, or what it raised; flunks when it has not returned after `seconds` (the thread is left: a read
    # blocked on a FIFO cannot always be interrupted).
    def within(test, seconds, label, &call)
      outcome = []
      thread = Thread.new do
        outcome << [:value, call.call]
      rescue Exception => e # rubocop:disable Lint/RescueException -- handed to the caller
        outcome << [:error, e]
      end
      thread.report_on_exception = false
      test.flunk("#{label}: it had not returned after #{seconds} s") unless thread.join(seconds)
      kind, value = outcome.first
      raise value if kind == :error

      value
    end

    # hostile_keys.json: each case's key, in every form a Ruby String carries it, on every store.
    module Keys
      module_function

      def cases(document)
        entry = Hostile.entry(document)
        sentinel = document.fetch("sentinel")
        document.fetch("cases").map do |vector|
          unless %w[stored refused].include?(vector["outcome"])
            raise ArgumentError, "#{vector['name']}: unknown outcome #{vector['outcome'].inspect}"
          end

          [vector.fetch("name"), ->(test) { check(test, vector, entry, sentinel) }]
        end
      end

      # The forms README.md gives Ruby: key_utf16's code units as a UTF-16LE String (so the store's own transcoding
      # runs), and key_hex's bytes tagged UTF-8.
      def forms(vector)
        forms = {}
        units = vector["key_utf16"]
        forms["utf16le"] = units.pack("v*").force_encoding(Encoding::UTF_16LE) if units
        forms["utf8"] = [vector.fetch("key_hex")].pack("H*").force_encoding(Encoding::UTF_8)
        forms
      end

      def check(test, vector, entry, sentinel)
        servers = { "memcached" => Hostile.env(test, "LARDER_CONFORMANCE_MEMCACHED"),
                    "redis" => Hostile.env(test, "LARDER_CONFORMANCE_REDIS") }
        Dir.mktmpdir("larder-hostile-keys-") do |dir|
          forms(vector).each do |form, key|
            root = File.join(dir, "files-#{form}")
            { "memory" => "memory://", "file" => "file://#{root}", "sqlite" => "sqlite://#{dir}/keys-#{form}.db",
              "memcached" => "memcached://#{servers['memcached']}?timeout=5s",
              "redis" => "redis://#{servers['redis']}?timeout=5s" }.each do |name, url|
              on_store(test, "#{form} key on #{name}", Store.new(name, url, servers[name], root), vector, key, entry,
                       sentinel)
            end
          end
        end
      end

      # A store of the case: its kind, URL, server ("host:port") and file root.
      Store = Struct.new(:name, :url, :server, :root)

      def on_store(test, label, where, vector, key, entry, sentinel)
        store = Larder::Stores.open(where.url)
        sentinel_key = sentinel.fetch("key")
        sentinel_value = sentinel.fetch("value").b
        if where.server
          where.name == "memcached" ? RawProbe.memcached_flush(where.server) : RawProbe.redis(where.server, "FLUSHALL")
          store.set(sentinel_key, sentinel_value)
        end
        if vector["outcome"] == "refused"
          refused(test, label, store, key, where)
        else
          stored(test, label, store, key, [vector.fetch("wire_hex")].pack("H*"), entry, where)
        end
        if where.server
          test.assert_equal sentinel_value, raw_get(where, sentinel_key.b), "#{label}: the sentinel was changed"
        end
      rescue Minitest::Assertion
        raise
      rescue StandardError => e
        test.flunk("#{label}: #{e.class}: #{e.message}")
      ensure
        store&.close
      end

      def refused(test, label, store, key, where)
        operations = { "get" => -> { store.get(key) }, "get_many" => -> { store.get_many([key]) },
                       "set" => -> { store.set(key, "v".b) }, "add" => -> { store.add(key, "v".b) },
                       "delete" => -> { store.delete(key) } }
        operations["purge_prefix"] = -> { store.purge_prefix(key) } unless key.empty?
        operations.each do |operation, call|
          answer = begin
            "answered #{call.call.inspect[0, 80]}"
          rescue Larder::InvalidKey => e
            e
          end
          test.assert_kind_of Larder::InvalidKey, answer, "#{label}: #{operation} was not refused"
          test.assert_equal "invalid_key", answer.kind, "#{label}: #{operation}"
        end
        return unless where.name == "redis"

        test.assert_equal 1, RawProbe.redis(where.server, "DBSIZE"), "#{label}: DBSIZE (the sentinel alone)"
      end

      # Memory and SQLite are checked through the store only; memcached, Redis and the file store from outside too.
      def stored(test, label, store, key, wire, entry, where)
        outside = where.name != "memory" && where.name != "sqlite"
        store.set(key, entry)
        test.assert_equal entry, store.get(key)&.b, "#{label}: get"
        test.assert_equal entry, raw_get(where, wire), "#{label}: the raw probe of #{wire.unpack1('H*')}" if outside
        if where.name == "redis"
          test.assert_equal 2, RawProbe.redis(where.server, "DBSIZE"), "#{label}: DBSIZE (the sentinel and the key)"
        end
        test.assert_equal true, store.delete(key), "#{label}: delete"
        test.assert_nil raw_get(where, wire), "#{label}: the raw probe after delete" if outside
        test.assert_nil store.get(key), "#{label}: get after delete"
      end

      # What the server or the directory holds at `wire` (bytes), from outside the store.
      def raw_get(where, wire)
        case where.name
        when "memcached" then RawProbe.memcached_get(where.server, wire)
        when "redis" then RawProbe.redis(where.server, "GET", wire)
        when "file" then RawProbe.file_value(where.root, wire)
        else raise ArgumentError, "no raw probe for #{where.name}"
        end
      end
    end

    # hostile_pages.json: each request through Larder::Rack::PageCache, its env as Puma makes it.
    module Pages
      PAGE_HEADERS = { "content-type" => "text/plain", "cache-control" => "public, max-age=60" }.freeze

      module_function

      def cases(document)
        document.fetch("cases").map do |vector|
          unless [["key"], ["not_stored"]].include?(vector.fetch("expected").keys)
            raise ArgumentError, "#{vector['name']}: expected is a key or not_stored"
          end

          [vector.fetch("name"), ->(test) { check(test, vector) }]
        end
      end

      def check(test, vector)
        options = vector["options"] || {}
        store = Larder::Stores.open("memory://")
        app = ->(_env) { [200, PAGE_HEADERS.dup, ["a page"]] }
        cache = Larder::Rack::PageCache.new(app, store: store, site: options["site"], scheme: options["scheme"],
                                                 trusted_proxies: options.fetch("trusted_proxies", []))
        cache.call(env(vector.fetch("request")))
        expected = vector.fetch("expected")
        if expected.key?("key")
          test.assert_equal({}, cache.not_stored, "not stored")
          test.refute_nil store.get(expected["key"]), "nothing under #{expected['key'].inspect}"
          test.assert_equal 1, store.size, "entries"
        else
          test.assert_equal 0, store.size, "stored a page; expected not_stored #{expected['not_stored']}"
          test.assert_equal({ expected["not_stored"] => 1 }, cache.not_stored)
        end
      end

      # The Rack env of a request as Puma makes it: REQUEST_URI the target as sent (absolute form included),
      # PATH_INFO and QUERY_STRING its origin part, one HTTP_ field per header, repeated lines joined with ", ".
      def env(request)
        target = request.fetch("target")
        origin = target.start_with?("/") ? target : (target.split("://", 2).last[%r{/.*}] || "/")
        path, query = origin.split("?", 2)
        env = { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query.to_s,
                "REQUEST_URI" => target, "SERVER_NAME" => "app.internal", "SERVER_PORT" => "8000",
                "SERVER_PROTOCOL" => "HTTP/1.1", "SERVER_SOFTWARE" => "puma", "REMOTE_ADDR" => request.fetch("peer"),
                "rack.url_scheme" => request.fetch("scheme"), "rack.input" => StringIO.new(+""),
                "rack.errors" => StringIO.new }
        request.fetch("headers").each do |name, value|
          field = "HTTP_#{name.upcase.tr('-', '_')}"
          env[field] = env.key?(field) ? "#{env[field]}, #{value}" : value
        end
        env
      end
    end

    # hostile_files.json: a file store opened on a tree hostile_tree.py plants, its operations, then the tree checked.
    module Files
      OPERATION_SECONDS = 5
      OPERATIONS = %w[open get get_many set add delete delete_if purge_prefix purge_tag].freeze

      module_function

      def cases(document)
        entry = Hostile.entry(document)
        document.fetch("cases").map do |vector|
          unknown = vector.fetch("operations").map { |operation| operation["op"] } - OPERATIONS
          raise ArgumentError, "#{vector['name']}: unknown operations #{unknown}" unless unknown.empty?

          [vector.fetch("name"), ->(test) { check(test, vector, entry) }]
        end
      end

      def tree(action, name, root, outside)
        Open3.capture3("python3", HOSTILE_TREE, action, name, root, outside)
      end

      def check(test, vector, entry)
        name = vector.fetch("name")
        Dir.mktmpdir("larder-hostile-files-") do |base|
          root = File.join(base, "root")
          outside = File.join(base, "outside")
          FileUtils.mkdir_p([root, outside])
          _, err, status = tree("plant", name, root, outside)
          test.assert status.success?, "hostile_tree.py plant failed: #{err.strip}"
          run_operations(test, vector, entry, root)
          out, err, status = tree("check", name, root, outside)
          test.assert status.success?, "hostile_tree.py check: #{err.strip.empty? ? out.strip : err.strip}"
        end
      end

      def run_operations(test, vector, entry, root)
        query = vector.fetch("url_query", "")
        url = "file://#{root}#{query.empty? ? '' : "?#{query}"}"
        operations = vector.fetch("operations")
        operations = [{ "op" => "open", "expect" => "ok" }] + operations unless operations.first&.fetch("op") == "open"
        store = nil
        operations.each_with_index do |operation, step|
          label = "operation #{step} (#{operation['op']} #{operation['key'] || operation['prefix']})"
          if operation["op"] == "open"
            store = open_store(test, url, operation.fetch("expect"), label)
            break unless store
          else
            run(test, store, operation, entry, label)
          end
        end
      ensure
        store&.close
      end

      def open_store(test, url, expect, label)
        store = Larder::Stores.open(url)
        test.assert_equal expect, "ok", "#{label}: the URL was accepted"
        store
      rescue Larder::UrlError => e
        test.assert_equal expect, "url_error", "#{label}: the URL was refused (#{e.message})"
        nil
      end

      def run(test, store, operation, entry, label)
        op = operation.fetch("op")
        expect = operation.fetch("expect")
        key = operation.fetch("key", "")
        calls = { "get" => -> { store.get(key) }, "get_many" => -> { store.get_many([key]) },
                  "set" => -> { store.set(key, entry) }, "add" => -> { store.add(key, entry) },
                  "delete" => -> { store.delete(key) }, "delete_if" => -> { store.delete_if(key, entry) },
                  "purge_prefix" => -> { store.purge_prefix(operation.fetch("prefix", "")) },
                  "purge_tag" => -> { store.purge_tag(operation.fetch("tag", "")) } }
        begin
          result = Hostile.within(test, OPERATION_SECONDS, label, &calls.fetch(op))
        rescue Larder::InvalidKey => e
          test.flunk("#{label}: invalid_key (#{e.message}); the case expects #{expect}")
        rescue Larder::StoreError => e
          test.assert_equal expect, "error", "#{label}: #{e.class}: #{e.message}"
          return
        end
        result = single(test, result, label) if op == "get_many"
        test.assert answer_is?(expect, op, result, entry), "#{label}: answered #{result.inspect[0, 80]}; " \
                                                           "the case expects #{expect}"
      end

      def single(test, result, label)
        test.assert_kind_of Array, result, label
        test.assert_equal 1, result.size, label
        result.first
      end

      def answer_is?(expect, operation, result, entry)
        case expect
        when "miss" then result.nil?
        when "hit" then result&.b == entry
        when "ok" then operation != "add" || result == true
        when "deleted" then result == true
        when "noop" then [false, nil, 0].include?(result)
        else false
        end
      end
    end

    # hostile_replies.json: every operation against larder-hostile, each on a fresh store and a fresh server.
    module Replies
      OPERATIONS = {
        "get" => ->(store, _entry) { store.get("k1") },
        "get_many" => ->(store, _entry) { store.get_many(%w[k1 k2 k3]) },
        "set" => ->(store, entry) { store.set("k1", entry) },
        "add" => ->(store, entry) { store.add("k1", entry) },
        "incr" => ->(store, _entry) { store.incr("k1", 1) },
        "delete" => ->(store, _entry) { store.delete("k1") },
        "delete_if" => ->(store, entry) { store.delete_if("k1", entry) },
        "purge_tag" => ->(store, _entry) { store.purge_tag("t") },
        "purge_prefix" => ->(store, _entry) { store.purge_prefix("k") }
      }.freeze

      module_function

      def cases(document)
        entry = Hostile.entry(document)
        document.fetch("cases").map do |vector|
          unless %w[memcached redis].include?(vector["protocol"])
            raise ArgumentError, "#{vector['name']}: unknown protocol #{vector['protocol'].inspect}"
          end

          unknown = vector.fetch("operations") - OPERATIONS.keys
          raise ArgumentError, "#{vector['name']}: unknown operations #{unknown}" unless unknown.empty?

          [vector.fetch("name"), ->(test) { check(test, vector, entry) }]
        end
      end

      def check(test, vector, entry)
        binary = Hostile.env(test, "LARDER_HOSTILE")
        test.assert File.executable?(binary), "$LARDER_HOSTILE (#{binary}) is not an executable"
        failures = vector.fetch("operations").filter_map do |operation|
          outcome = serve(test, binary, vector) { |address| attempt(vector, address, operation, entry) }
          "#{operation} #{outcome}" if outcome
        end
        test.assert_empty failures, failures.join("; ")
      end

      # Runs a larder-hostile server for the block, which gets its "127.0.0.1:PORT"; it stops when its stdin closes.
      def serve(test, binary, vector)
        command = [binary, vector.fetch("protocol"), vector.fetch("behaviour"), *vector.fetch("server_args")]
        io = IO.popen(command.map(&:to_s), "r+", err: File::NULL)
        address = io.gets.to_s.strip
        test.assert_match(/\A127\.0\.0\.1:\d+\z/, address, "#{command.join(' ')} printed no address")
        yield address
      ensure
        if io
          io.close_write
          io.close
        end
      end

      # nil when `operation` failed with the store's own error within the case's time, else what it did.
      def attempt(vector, address, operation, entry)
        store = Larder::Stores.open("#{vector.fetch('protocol')}://#{address}?#{vector.fetch('url_query')}")
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        begin
          "succeeded (#{OPERATIONS.fetch(operation).call(store, entry).inspect[0, 60]})"
        rescue Larder::InvalidKey => e
          "invalid_key (#{e.message})"
        rescue Larder::StoreError => e
          elapsed_ms = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000
          "failed only after #{elapsed_ms.round} ms (#{e.message[0, 120]})" if elapsed_ms > vector["within_ms"]
        rescue StandardError, SystemStackError, NoMemoryError => e
          "raised #{e.class}: #{e.message[0, 120]}"
        ensure
          store.close
        end
      end
    end
  end
end
