# frozen_string_literal: true

module Conformance
  # ring.json (memcached's ketama ring, spec/STORES.md §4.2) and stores.json (the keys a store writes, and the keys
  # every store refuses or accepts, §2), as computations: no server. test/support/key_safety.rb also tries
  # stores.json's refused and accepted keys on every real store.
  module Stores
    # ring.json: the continuum's points and the server of each key.
    module Ring
      module_function

      def cases(document)
        document.fetch("cases").map { |vector| [vector.fetch("name"), ->(test) { check(test, vector) }] }
      end

      def check(test, vector)
        all = vector["servers"].map { |s| [s["host"], s["port"], s["weight"]] }
        ejected = vector["ejected"] || []
        indexes = (0...all.size).reject { |i| ejected.include?(i) }
        ring = Larder::Ring.new(indexes.map { |i| all[i] }, indexes)
        test.assert_equal vector["points"], ring.points.size
        test.assert_equal vector["first_points"], ring.points.first(8)
        vector["keys"].each do |key|
          test.assert_equal key["hash"], Larder::Ring.hash(key["key"])
          test.assert_equal key["server"], ring.server(key["key"]), key["key"]
        end
      end
    end

    # stores.json: stored and internal keys, and the key rule. Cases without a name are named by kind and position,
    # as the Rust runner names them.
    module StoredKeys
      module_function

      def cases(document)
        document.fetch("cases").each_with_index.map do |vector, index|
          [vector["name"] || "#{vector['kind']}-#{index}", ->(test) { check(test, vector) }]
        end
      end

      def check(test, vector)
        keys = Larder::Stores::Keys.new(vector["prefix"])
        case vector["kind"]
        when "stored" then test.assert_equal vector["stored_key"], keys.stored(vector["key"])
        when "internal" then test.assert_equal vector["stored_key"], keys.internal(vector["purpose"], vector["name"])
        when "refused" then test.refute_nil Larder::Keys.key_problem([vector["key_hex"]].pack("H*")), vector["name"]
        when "accepted"
          key = [vector["key_hex"]].pack("H*").force_encoding(Encoding::UTF_8)
          test.assert_nil Larder::Keys.key_problem(key), vector["name"]
          test.assert_equal key, Larder::Keys.safe_key(key), "an accepted key is its own safe key"
        else test.flunk "unknown kind #{vector['kind'].inspect}"
        end
      end
    end
  end
end
