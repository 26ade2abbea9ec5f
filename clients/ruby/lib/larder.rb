# frozen_string_literal: true

# larder's entry format, keys, stores and cache for Ruby: the bytes every larder component and client library agree
# on (spec/FORMAT.md), in the stores they share (spec/STORES.md).
#
#   data = Larder.encode({ "id" => 7 }, created_at: 1_700_000_000_000, ttl_ms: 60_000, tags: ["user:7"])
#   Larder.decode(data).value  # => {"id"=>7}
module Larder
  autoload :Ring, "larder/ring"
  autoload :StoreUrl, "larder/store_url"
  autoload :Stores, "larder/stores"
  autoload :Cache, "larder/cache"
  autoload :CLI, "larder/cli"
  autoload :Report, "larder/report"
  autoload :Display, "larder/display"
  autoload :PageCaching, "larder/page_caching"
  # Rack middleware (Larder::Rack::PageCache).
  module Rack
    autoload :PageCache, "larder/rack/page_cache"
    autoload :CacheRules, "larder/rack/cache_rules"
  end
end

require_relative "larder/version"
require_relative "larder/errors"
require_relative "larder/header"
require_relative "larder/compressors"
require_relative "larder/serializers"
require_relative "larder/response"
require_relative "larder/entry"
require_relative "larder/keys"
require_relative "larder/purge"
require_relative "larder/railtie" if defined?(Rails::Railtie)
