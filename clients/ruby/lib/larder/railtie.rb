# frozen_string_literal: true

require "rails/railtie"

module Larder
  # Rails integration: `config.larder[:store]` sets Larder.store (for Larder.purge; `.store` is Hash#store),
  # `config.larder.page_cache` puts Larder::Rack::PageCache first in the middleware stack (so it sees the response as
  # the client will: ETag, cookies and all), and every controller gets Larder::PageCaching.
  #
  #   config.larder[:store] = "memcached://cache1:11211"
  #   config.larder.page_cache = { namespace: "www" }     # or true; the store defaults to config.larder[:store]
  class Railtie < ::Rails::Railtie
    config.larder = ActiveSupport::OrderedOptions.new

    initializer "larder.page_cache" do |app|
      settings = app.config.larder
      Larder.store = settings[:store] if settings[:store]
      if settings[:page_cache]
        options = settings[:page_cache] == true ? {} : settings[:page_cache].to_h
        options = { store: Larder.store }.merge(options) unless options.key?(:store)
        app.middleware.insert(0, Larder::Rack::PageCache, **options)
      end
      ActiveSupport.on_load(:action_controller) { include Larder::PageCaching }
    end
  end
end
