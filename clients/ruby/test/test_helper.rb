# frozen_string_literal: true

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "minitest/autorun"
require "json"
require "larder"

# Paths and helpers shared by the tests.
module TestPaths
  REPO = File.expand_path("../../..", __dir__)
  VECTORS = File.join(REPO, "spec", "vectors")
  RUST_BIN = File.join(REPO, "target", "debug", "larder")

  module_function

  def vectors(name)
    JSON.parse(File.read(File.join(VECTORS, "#{name}.json")))
  end

  def rust_bin
    return RUST_BIN if File.executable?(RUST_BIN)

    raise "the Rust binary #{RUST_BIN} is missing: build it with `cargo build -p larder-cli` from the repository root"
  end
end

require_relative "support/servers"
require "larder/stores"
