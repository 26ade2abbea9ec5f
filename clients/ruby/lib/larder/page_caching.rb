# frozen_string_literal: true

module Larder
  # Controller helpers for the page cache (Larder::Rack::PageCache), included into every controller by the Railtie:
  #
  #   class ProductsController < ApplicationController
  #     larder_page_cache expires_in: 10.minutes, only: :show, tags: -> { ["product:#{params[:id]}"] }
  #   end
  #
  # opts the actions in whatever their Cache-Control says (browsers keep the app's own header), or, per request,
  # `larder_page_cache!(expires_in: 60, tags: [...])`. `larder_tags(*tags)` adds tags through `Surrogate-Key`,
  # which the front also reads from responses it stores itself. Purge with `Larder.purge(tag: …)`.
  module PageCaching
    def self.included(base)
      base.extend(ClassMethods)
    end

    # `larder_page_cache` for controllers.
    module ClassMethods
      # An after_action that opts the actions in. `tags`: an Array, or a Proc run in the controller.
      def larder_page_cache(expires_in:, stale: 0, tags: nil, **filter)
        after_action(**filter) do
          these = tags.respond_to?(:call) ? instance_exec(&tags) : tags
          larder_page_cache!(expires_in: expires_in, stale: stale, tags: these)
        end
      end
    end

    # Stores this response in the front's store for `expires_in` seconds (and `stale` more for stale serving).
    def larder_page_cache!(expires_in:, stale: 0, tags: nil)
      request.env[Larder::Rack::PageCache::ENV_KEY] = { expires_in: expires_in.to_i, stale: stale.to_i,
                                                        tags: Array(tags).map(&:to_s) }
    end

    # Adds tags to the response's `Surrogate-Key` (space-separated), for the front and the page cache.
    def larder_tags(*tags)
      current = response.headers["Surrogate-Key"].to_s.split
      response.headers["Surrogate-Key"] = (current + tags.flatten.map(&:to_s)).uniq.join(" ")
    end
  end
end
