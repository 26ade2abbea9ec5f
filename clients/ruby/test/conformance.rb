# frozen_string_literal: true

# The Ruby column of the conformance matrix (spec/vectors/README.md, "Conformance runners"):
#
#   ruby clients/ruby/test/conformance.rb spec/vectors/storage.json
#
# prints one JSON line per file: {"language":"ruby","file":…,"status":"pass"|"fail"|"not_applicable","cases":N,
# "failed":[…],"reason":…}. The test suite defines one test per case from the same `Conformance.cases`
# (vectors_test.rb), so the matrix and the suite cannot disagree. A case is a name and a check that takes an
# assertion context (a Minitest::Test in the suite, a Checker here) and asserts on it. hostile_keys.json and
# hostile_replies.json need servers, named by LARDER_CONFORMANCE_MEMCACHED, LARDER_CONFORMANCE_REDIS and
# LARDER_HOSTILE (conformance/hostile.rb), and outage.json the same servers and LARDER_FAULTS
# (conformance/outage.rb); the other files need none.

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "json"
require "minitest"
require "larder"
require_relative "conformance/entries"
require_relative "conformance/keys"
require_relative "conformance/stores"
require_relative "conformance/signed"
require_relative "conformance/storage"
require_relative "conformance/hostile"
require_relative "conformance/outage"

module Conformance
  # The vector files this runner knows, by name: the module whose `cases(document)` lists their cases.
  FILES = { "entries.json" => Entries::Valid, "invalid.json" => Entries::Invalid, "keys.json" => Keys,
            "ring.json" => Stores::Ring, "stores.json" => Stores::StoredKeys, "signed.json" => Signed,
            "storage.json" => Storage, "hostile_keys.json" => Hostile::Keys, "hostile_pages.json" => Hostile::Pages,
            "hostile_files.json" => Hostile::Files, "hostile_replies.json" => Hostile::Replies,
            "outage.json" => Outage }.freeze
  # Files with nothing for Ruby to check, and why (none today: Ruby reads and writes everything the vectors cover).
  NOT_APPLICABLE = {}.freeze
  MAX_FAILED = 20

  # Not a vector file this runner can judge.
  class Unknown < StandardError; end

  # Minitest's assertions outside a test: what the runner hands each check.
  class Checker
    include Minitest::Assertions
    attr_accessor :assertions

    def initialize
      @assertions = 0
    end
  end

  module_function

  # [[name, check], …] for the vector file at `path`; raises Unknown for a file this runner does not know.
  def cases(path)
    name = File.basename(path)
    checks = FILES.fetch(name) do
      raise Unknown, "#{name} is not a vector file this runner knows: add it to clients/ruby/test/conformance.rb"
    end
    document = begin
      JSON.parse(File.read(path))
    rescue SystemCallError, JSON::ParserError => e
      raise Unknown, "cannot read #{path}: #{e.message}"
    end
    checks.cases(document)
  end

  # The report for one file (spec/vectors/README.md): every case run, each failure caught as its own.
  def run(path)
    report = { "language" => "ruby", "file" => File.basename(path), "status" => "pass", "cases" => 0,
               "failed" => [], "reason" => nil }
    if NOT_APPLICABLE.key?(report["file"])
      return report.merge("status" => "not_applicable", "reason" => NOT_APPLICABLE[report["file"]])
    end

    cases = cases(path)
    failures = failures(cases)
    report["cases"] = cases.size
    return report if failures.empty?

    name, message = failures.first
    report.merge("status" => "fail", "failed" => failures.keys.first(MAX_FAILED), "reason" => "#{name}: #{message}")
  rescue Unknown => e
    report.merge("status" => "fail", "reason" => e.message)
  end

  # {name => what it got} for the cases that failed.
  def failures(cases)
    cases.each_with_object({}) do |(name, check), failed|
      check.call(Checker.new)
    rescue Minitest::Assertion, StandardError => e
      message = e.is_a?(Minitest::Assertion) ? e.message : "#{e.class}: #{e.message}"
      failed[name] = message.gsub(/\s+/, " ").strip[0, 500]
    end
  end
end

if $PROGRAM_NAME == __FILE__
  if ARGV.empty?
    warn "usage: ruby clients/ruby/test/conformance.rb FILE… (files of spec/vectors)"
    exit 2
  end
  ARGV.each { |path| puts JSON.generate(Conformance.run(path)) }
end
