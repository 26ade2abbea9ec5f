# frozen_string_literal: true

require_relative "test_helper"
require_relative "conformance"

# Every case of every file in spec/vectors, one test each, through the conformance runner's own checks
# (test/conformance.rb, which `make conformance` runs), so the suite and the matrix cannot disagree. The cases of
# hostile_keys.json, hostile_replies.json and outage.json get the servers they name from the suite's harness (a
# memcached and a redis-server of their own, larder-hostile, larder-faults) unless the environment names them already.
class VectorsTest < Minitest::Test
  SERVED = %w[hostile_keys.json hostile_replies.json outage.json].freeze

  Conformance::FILES.each_key do |file|
    Conformance.cases(File.join(TestPaths::VECTORS, file)).each do |name, check|
      define_method("test_#{File.basename(file, '.json')}_#{name.gsub(/[^A-Za-z0-9_]/, '_')}") do
        Servers.conformance_environment if SERVED.include?(file)
        check.call(self)
      end
    end
  end

  # A vector file the runner does not know fails in the matrix; here too, so adding a file means adding its checks.
  def test_the_runner_knows_every_vector_file
    files = Dir[File.join(TestPaths::VECTORS, "*.json")].map { |path| File.basename(path) }
    assert_operator files.size, :>=, 7
    assert_empty files - Conformance::FILES.keys - Conformance::NOT_APPLICABLE.keys
  end
end
