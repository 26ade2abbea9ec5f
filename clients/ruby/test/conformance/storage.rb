# frozen_string_literal: true

require "larder/rack/cache_rules"

module Conformance
  # storage.json (spec/HTTP.md §1): Larder::Rack::CacheRules, built from each case's settings, gives every case's
  # expected outcome. A setting this runner does not know fails the case, so a new one is never silently ignored.
  # The file's shape (unique names, notes, known reasons, sorted lowercase Vary names) is a case of its own,
  # `file-shape`, as in the Rust and Python runners.
  module Storage
    # storage.json's settings (spec/HTTP.md §1.8) and the CacheRules options that take them (named as the front's
    # flags, in seconds as they are).
    SETTINGS = { "targeted_fields" => :targeted_fields, "surrogate_control" => :surrogate_control,
                 "heuristic_max_secs" => :heuristic_max, "cache_set_cookie" => :cache_set_cookie,
                 "stale_while_revalidate_secs" => :stale_while_revalidate,
                 "stale_if_error_secs" => :stale_if_error, "revalidation_window_secs" => :revalidation_window,
                 "honor_request_cache_control" => :honor_request_cache_control }.freeze

    REASONS = %w[method status no-store request-no-store private authorization set-cookie vary-star
                 no-explicit-freshness].freeze
    STORED_FIELDS = %w[fresh_ms initial_age_ms keep_stale_ms stored vary].freeze

    module_function

    def cases(document)
      defaults = document.fetch("rules_defaults")
      [["file-shape", ->(test) { shape(test, document) }]] + document.fetch("cases").map do |vector|
        [vector.fetch("name"), ->(test) { test.assert_equal vector["expected"], outcome(defaults, vector) }]
      end
    end

    def shape(test, document)
      test.assert_equal 1, document["schema"]
      names = document["cases"].map { |vector| vector["name"] }
      test.assert_equal names.uniq, names, "names are unique"
      document["cases"].each do |vector|
        name = vector["name"]
        test.refute_empty vector["note"].to_s, "#{name} has a note"
        expected = vector["expected"]
        if expected["stored"]
          test.assert_equal STORED_FIELDS, expected.keys.sort, name
          test.assert_equal expected["vary"].uniq.sort, expected["vary"], "#{name}: vary is sorted and unique"
          test.assert_equal expected["vary"].map(&:downcase), expected["vary"], "#{name}: vary is lowercase"
        else
          test.assert_includes REASONS, expected["reason"], name
        end
      end
    end

    def rules(defaults, vector)
      settings = defaults.merge(vector.fetch("rules"))
      options = settings.transform_keys do |name|
        SETTINGS.fetch(name) { raise ArgumentError, "unknown setting #{name}: add it to CacheRules" }
      end
      Larder::Rack::CacheRules.new(**options)
    end

    def outcome(defaults, vector)
      request = vector.fetch("request")
      response = vector.fetch("response")
      plan, reason = rules(defaults, vector).storage(request.fetch("method"), request.fetch("headers"),
                                                     response.fetch("status"), response.fetch("headers"),
                                                     vector.fetch("request_time_ms"), vector.fetch("response_time_ms"))
      return { "stored" => false, "reason" => reason } unless plan

      { "stored" => true, "fresh_ms" => plan.fresh_ms, "initial_age_ms" => plan.initial_age_ms,
        "keep_stale_ms" => plan.keep_stale_ms, "vary" => plan.vary }
    end
  end
end
