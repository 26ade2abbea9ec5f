# frozen_string_literal: true

require "base64"

module Conformance
  # entries.json (decode, encode, byte identity when uncompressed) and invalid.json (refused with the right kind),
  # as spec/vectors/README.md says to check them.
  module Entries
    # entries.json: every valid entry.
    module Valid
      module_function

      def cases(document)
        document.fetch("cases").map { |vector| [vector.fetch("name"), ->(test) { check(test, vector) }] }
      end

      def check(test, vector)
        decodes(test, vector, [vector["entry_hex"]].pack("H*"))
        return if vector["decode_only"]

        encoded = encode(vector)
        decodes(test, vector, encoded)
        test.assert_equal vector["entry_hex"], encoded.unpack1("H*"), "byte identity" if
          vector["stored_compressor"] == "none"
      end

      def decodes(test, vector, data)
        entry = Larder.decode(data)
        options = vector["options"]
        test.assert_equal vector["kind"], entry.kind
        test.assert_equal options["serializer"], entry.serializer
        test.assert_equal vector["stored_compressor"], entry.compressor
        %w[created_at expires_at stale_ms version tags].each do |field|
          expected = options[field]
          expected.nil? ? test.assert_nil(entry[field], field) : test.assert_equal(expected, entry[field], field)
        end
        expected = value(vector)
        test.assert_equal options["serializer"] == "raw" ? expected.b : expected, entry.value
      end

      def encode(vector)
        o = vector["options"]
        options = { compressor: o["compressor"], threshold: o["threshold"], level: o["level"],
                    created_at: o["created_at"], expires_at: o["expires_at"], stale_ms: o["stale_ms"],
                    version: o["version"], tags: o["tags"] }
        return Larder.encode_response(response(vector), **options) if vector["kind"] == "response"

        Larder.encode(plain_value(vector), serializer: o["serializer"], **options)
      end

      def value(vector)
        vector["kind"] == "response" ? response(vector) : plain_value(vector)
      end

      def plain_value(vector)
        case vector["options"]["serializer"]
        when "text" then vector["value_text"]
        when "raw" then Base64.strict_decode64(vector["value_base64"])
        else vector["value"]
        end
      end

      def response(vector)
        r = vector["response"]
        headers = r["headers"].map { |name, value| [header_bytes(name), header_bytes(value)] }
        Larder::HttpResponse.new(r["status"], headers, Base64.strict_decode64(r["body_base64"]),
                                 r["content_encoding"])
      end

      def header_bytes(part)
        part.is_a?(Hash) ? Base64.strict_decode64(part.fetch("$base64")) : part.b
      end
    end

    # invalid.json: entries every decoder refuses, with the error kind of FORMAT.md §7.
    module Invalid
      module_function

      def cases(document)
        document.fetch("cases").map { |vector| [vector.fetch("name"), ->(test) { check(test, vector) }] }
      end

      def check(test, vector)
        options = vector["max_size"] ? { max_size: vector["max_size"] } : {}
        error = test.assert_raises(Larder::InvalidEntry) { Larder.decode([vector["entry_hex"]].pack("H*"), **options) }
        test.assert_equal vector["error"], error.kind, error.message
      end
    end
  end
end
