# frozen_string_literal: true

# Runs ActiveSupport's own cache-store behaviour tests (activesupport/test/cache/behaviors at the tag of the
# installed ActiveSupport) against ActiveSupport::Cache::LarderStore on real memcached and Redis servers and on the
# memory store. The Rails tests are not part of this repository: `make rails-tests` puts them (from Debian's source
# package) at ${LARDER_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/larder}/rails-<version>/activesupport/test, the
# default here; RAILS_AS_TESTS names another copy of rails' activesupport/test at the installed version.
# Exclusions, each with its reason, are in EXCLUDED below and in clients/ruby/README.md.
$LOAD_PATH.unshift File.expand_path("../../lib", __dir__)
require "active_support"
require "active_support/version"

LARDER_CACHE_DIR = ENV.fetch("LARDER_CACHE_DIR") do
  File.join(ENV.fetch("XDG_CACHE_HOME") { File.join(Dir.home, ".cache") }, "larder")
end
RAILS_TESTS = ENV.fetch("RAILS_AS_TESTS") do
  File.join(LARDER_CACHE_DIR, "rails-#{ActiveSupport::VERSION::STRING}", "activesupport", "test")
end
unless File.exist?(File.join(RAILS_TESTS, "cache", "behaviors.rb"))
  abort "ActiveSupport's tests are not at #{RAILS_TESTS}: run `make rails-tests` from the repository root, or set " \
        "RAILS_AS_TESTS to a copy of rails' activesupport/test at v#{ActiveSupport::VERSION::STRING}"
end

require "active_support/testing/autorun"
require "active_support/testing/method_call_assertions"
require "active_support/cache"
require "active_support/cache/larder_store"
require "securerandom"
require_relative "../support/servers"
require File.join(RAILS_TESTS, "cache", "behaviors")

module ActiveSupport
  class TestCase
    include ActiveSupport::Testing::MethodCallAssertions
  end
end

# Tests of the behaviour modules that do not apply to LarderStore, with the reason.
EXCLUDED = {
  # A Dalli-specific connection pool (pool_size/pool_timeout options on the Dalli client); larder's stores manage
  # their own connections.
  "ConnectionPoolBehavior" => :all,
  # delete_matched needs the store to list keys, which memcached cannot; LarderStore raises NotImplementedError
  # (as MemCacheStore does) and offers purge_tag, and Larder stores' purge_prefix.
  "CacheDeleteMatchedBehavior" => :all,
  # These measure compression as the size of Marshal.dump of the ActiveSupport::Cache::Entry that read_entry
  # returns. LarderStore compresses the larder entry's payload (LZ4 by default, FORMAT.md §3) and hands
  # ActiveSupport an uncompressed Entry, so the measured sizes are equal. (The "should not be compressed" twins
  # of these tests run and pass.)
  "test_large_object_with_compress_true" => "compression is in the larder entry, not in the ActiveSupport Entry",
  "test_large_string_with_compress_true" => "compression is in the larder entry, not in the ActiveSupport Entry",
  "test_small_object_with_low_compress_threshold" => "compression is in the larder entry, not the Entry",
  "test_small_string_with_low_compress_threshold" => "compression is in the larder entry, not the Entry",
  # Stubs Time.now to 2008: the entry's expires_at (from the stubbed clock) is then long past by the real clock,
  # and a larder store never stores or returns an entry past its hard expiry (spec/STORES.md §2).
  "test_expires_in" => "Time.now stubbed to 2008; larder stores enforce entry expiry by the real clock"
}.freeze

# Removes the excluded tests from a test class, printing what was left out.
def exclude_tests(klass)
  EXCLUDED.each do |name, reason|
    next if ENV["RUN_EXCLUDED"].to_s.split(",").include?(name) # to look at one again

    if name.start_with?("test_")
      klass.send(:undef_method, name) if klass.method_defined?(name)
    else
      Object.const_get(name).instance_methods.grep(/\Atest_/).each do |test|
        klass.send(:undef_method, test) if klass.method_defined?(test)
      end
    end
    next if reason == :all

    warn "excluded #{klass.name}##{name}: #{reason}" if ENV["VERBOSE_EXCLUSIONS"]
  end
end

# Marshal values are signed (spec/FORMAT.md §2): the behaviours write Symbols and objects, so the store needs a secret,
# as a Rails app's secret_key_base.
SIGNING_SECRET = SecureRandom.hex(64)

# What every LarderStore test class shares: the store under test and the helpers the behaviours expect.
module LarderStoreTests
  def lookup_store(options = {})
    ActiveSupport::Cache.lookup_store(:larder_store, store_url,
                                      { namespace: @namespace, signing_secret: SIGNING_SECRET }.merge(options))
  end

  def setup
    @namespace = "test-#{SecureRandom.hex}"
    @cache = lookup_store(expires_in: 60)
    @peek = lookup_store
    @cache.logger = ActiveSupport::Logger.new(File::NULL)
  end

  def emulating_unavailability
    dead = ActiveSupport::Cache.lookup_store(:larder_store, dead_url, namespace: @namespace,
                                                                      signing_secret: SIGNING_SECRET)
    dead.logger = ActiveSupport::Logger.new(File::NULL)
    yield dead
  end

  def random_string(length)
    (0...length).map { rand(33..126).chr }.join
  end

  include CacheStoreBehavior
  include CacheStoreVersionBehavior
  include CacheStoreCoderBehavior
  include LocalCacheBehavior
  include CacheIncrementDecrementBehavior
  include CacheInstrumentationBehavior
  include EncodedKeyCacheBehavior
  include AutoloadingCacheBehavior
end

class LarderStoreMemcachedTest < ActiveSupport::TestCase
  include LarderStoreTests
  include FailureSafetyBehavior
  include CacheDeleteMatchedBehavior
  include ConnectionPoolBehavior

  def store_url
    "memcached://#{Servers.shared_memcached}"
  end

  def dead_url
    "memcached://127.0.0.1:#{Servers.free_port}?failures=1&retry_after=60s&timeout=100ms"
  end
end

class LarderStoreRedisTest < ActiveSupport::TestCase
  include LarderStoreTests
  include FailureSafetyBehavior

  def store_url
    "redis://#{Servers.redis}/0"
  end

  def dead_url
    "redis://127.0.0.1:#{Servers.free_port}/0?failures=1&retry_after=60s&timeout=100ms"
  end
end

class LarderStoreMemoryTest < ActiveSupport::TestCase
  include LarderStoreTests

  # One memory store per test class, as a Rails process would share its cache store between requests.
  STORE = Larder::Stores::Memory.new

  def lookup_store(options = {})
    ActiveSupport::Cache.lookup_store(:larder_store,
                                      { store: STORE, namespace: @namespace,
                                        signing_secret: SIGNING_SECRET }.merge(options))
  end

  def store_url
    nil
  end
end

[LarderStoreMemcachedTest, LarderStoreRedisTest, LarderStoreMemoryTest].each { |klass| exclude_tests(klass) }
