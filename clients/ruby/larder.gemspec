# frozen_string_literal: true

require_relative "lib/larder/version"

Gem::Specification.new do |spec|
  spec.name = "larder"
  spec.version = Larder::VERSION
  spec.summary = "larder's shared cache entries, keys and stores for Ruby, and an ActiveSupport cache store"
  spec.description = "Reads and writes the larder entry format (spec/FORMAT.md) in the stores larder shares " \
                     "(memory, memcached, Redis, SQLite, PostgreSQL, files), so a Rails app, the Rust proxy and " \
                     "the other languages' clients read each other's entries."
  spec.authors = ["larder contributors"]
  spec.licenses = ["MIT", "Apache-2.0"] # "MIT OR Apache-2.0", as Cargo.toml and pyproject.toml
  spec.homepage = "https://example.invalid/larder"
  spec.required_ruby_version = ">= 3.1"
  # lib/larder/stores/redis_scripts/*.lua: spec/redis's scripts, which `rake build` copies in for the build.
  spec.files = Dir["lib/**/*.rb", "lib/larder/stores/redis_scripts/*.lua", "bin/*", "README.md"]
  spec.bindir = "bin"
  spec.executables = ["larder-rb"] # not `larder`: that is the Rust binary's name
  spec.require_paths = ["lib"]
  spec.add_dependency "msgpack", ">= 1.4"
  # LZ4 through ffi: a quarter of a Fiddle call's cost (lib/larder/native_lz4.rb; Fiddle is the fallback).
  spec.add_dependency "ffi", ">= 1.15"
  # Optional, loaded only by the stores and integrations that use them: redis (>= 4.6), pg, sqlite3,
  # activesupport (>= 6.1), rack.
  spec.metadata["rubygems_mfa_required"] = "true"
end
