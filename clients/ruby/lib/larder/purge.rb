# frozen_string_literal: true

# Larder.store and Larder.purge (see below).
module Larder
  # The process's shared store, for purges from anywhere in an app: `Larder.store = "memcached://…"` (the Railtie sets
  # it from `config.larder.store`), then `Larder.purge(tag: "product:7")`.
  class << self
    # The store set with `Larder.store=`; raises ConfigurationError when none was.
    def store
      @store or raise ConfigurationError, "no store: set Larder.store = \"memcached://…\" (or config.larder.store)"
    end

    # A store URL or an open store.
    def store=(store)
      @store = store.is_a?(String) ? Stores.open(store) : store
    end

    def store?
      !@store.nil?
    end

    # Removes, from every language's view, the entries with tag `tag`, the keys starting with `prefix`, or the page
    # `url` (its base key, so its Vary marker and with it every variant, and its alternate codings), as
    # `larder purge` does. `namespace` is the front's `--namespace` for URLs. Returns what the store returned.
    def purge(tag: nil, prefix: nil, url: nil, namespace: "", store: self.store)
      given = { tag: tag, prefix: prefix, url: url }.compact
      raise ArgumentError, "purge takes exactly one of tag:, prefix:, url:" unless given.size == 1

      return store.purge_tag(tag) if tag
      return store.purge_prefix(prefix) if prefix

      store.delete_many(Keys.url_keys(Keys.url_key("GET", url, namespace: namespace)))
    end
  end
end
