# frozen_string_literal: true

require_relative "test_helper"
require "active_support/cache/larder_store"
require_relative "conformance"

# spec/vectors/outage.json's cases (spec/STORES.md §3, "When the store fails") on ActiveSupport's LarderStore: the
# conformance runner's steps (test/conformance/outage.rb) with `fetch` being Rails' fetch (expires_in:), so a Rails
# app behind a frozen, refusing or cut-off store runs each block once per process too, and recovers.
class LarderStoreOutageTest < Minitest::Test
  # LarderStore answering the calls the outage steps make on a cache.
  class Rails
    def initialize(url, namespace)
      @cache = ActiveSupport::Cache::LarderStore.new(url, namespace: namespace)
    end

    def fetch(key, ttl:, &block)
      @cache.fetch(key, expires_in: ttl, &block)
    end

    def write(key, value, ttl:)
      @cache.write(key, value, expires_in: ttl)
    end

    def read(key)
      @cache.read(key)
    end

    def clear
      @cache.clear
    end

    def store
      @cache.larder
    end
  end

  OPEN = ->(url, namespace) { Rails.new(url, namespace) }

  Conformance::Outage.cases(TestPaths.vectors("outage"), open: OPEN).each do |name, check|
    define_method("test_outage_#{name}") do
      Servers.conformance_environment
      check.call(self)
    end
  end
end
