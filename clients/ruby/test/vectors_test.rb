# frozen_string_literal: true

require_relative "test_helper"
require_relative "conformance"

# Every case of every file in spec/vectors, one test each, through the conformance runner's own checks
# (test/conformance.rb, which `make conformance` runs), so the suite and the matrix cannot disagree.
class VectorsTest < Minitest::Test
  Conformance::FILES.each_key do |file|
    Conformance.cases(File.join(TestPaths::VECTORS, file)).each do |name, check|
      define_method("test_#{File.basename(file, '.json')}_#{name.gsub(/[^A-Za-z0-9_]/, '_')}") { check.call(self) }
    end
  end

  # A vector file the runner does not know fails in the matrix; here too, so adding a file means adding its checks.
  def test_the_runner_knows_every_vector_file
    files = Dir[File.join(TestPaths::VECTORS, "*.json")].map { |path| File.basename(path) }
    assert_operator files.size, :>=, 7
    assert_empty files - Conformance::FILES.keys - Conformance::NOT_APPLICABLE.keys
  end
end
