# frozen_string_literal: true

module Conformance
  # keys.json (spec/FORMAT.md §5): HTTP request keys, safe and namespaced keys, and the variant and alternate keys
  # through the helpers of §5.5 (`selecting_values` by way of `variant_key`, `alternate_key`, and `url_keys`, whose
  # alternates must be the ones `alternate_key` gives). Case names are prefixed with their section.
  module Keys
    SECTIONS = %w[http safe namespaced variants alternates].freeze

    module_function

    def cases(document)
      SECTIONS.flat_map do |section|
        document.fetch(section).map do |vector|
          ["#{section}/#{vector.fetch('name')}", ->(test) { send(section, test, vector) }]
        end
      end
    end

    def http(test, vector)
      drop = vector["drop"] || Larder::Keys::DEFAULT_DROP
      key = Larder::Keys.url_key(vector["method"], vector["url"], namespace: vector["namespace"] || "", drop: drop)
      test.assert_equal vector["key"], key
    end

    def safe(test, vector)
      test.assert_equal vector["safe"], Larder::Keys.safe_key(vector["key"])
    end

    def namespaced(test, vector)
      test.assert_equal vector["full"], Larder::Keys.namespaced_key(vector["namespace"], vector["key"])
    end

    def variants(test, vector)
      key = Larder::Keys.variant_key(vector["base_key"], vector["marker"], vector["request_headers"])
      test.assert_equal vector["variant_key"], key
    end

    def alternates(test, vector)
      test.assert_equal vector["alternate_key"], Larder::Keys.alternate_key(vector["entry_key"], vector["coding"])
      test.assert_includes Larder::Keys.url_keys(vector["entry_key"]), vector["alternate_key"],
                           "a URL purge of the entry key removes its alternates"
    end
  end
end
