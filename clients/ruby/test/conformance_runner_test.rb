# frozen_string_literal: true

require_relative "test_helper"
require_relative "conformance"
require "open3"
require "tmpdir"

# The runner's contract (spec/vectors/README.md, "Conformance runners"), as `make conformance` calls it: one JSON
# line per file, from the repository root and from clients/ruby; a failing case named with what it got; an unknown
# or unreadable file a `fail` with a reason, exit status 0; no file at all a usage error.
class ConformanceRunnerTest < Minitest::Test
  RUNNER = File.expand_path("conformance.rb", __dir__)
  CLIENT = File.expand_path("..", __dir__)

  def runner(*args, dir: TestPaths::REPO, env: {})
    out, err, status = Open3.capture3(env, RbConfig.ruby, RUNNER, *args, chdir: dir)
    [out.lines.map { |line| JSON.parse(line) }, err, status.exitstatus]
  end

  # Every file from the repository root, as `make conformance` runs them (the hostile ones with the servers of the
  # suite's harness in the variables of spec/vectors/README.md); from clients/ruby, the files that need no server
  # (the hostile ones take seconds each, and VectorsTest runs their every case in this process too).
  def test_every_file_passes_from_the_repository_root_and_from_clients_ruby
    env = Servers.conformance_environment
    everything = Conformance::FILES.keys.sort
    quiet = everything.reject { |file| file.start_with?("hostile_") }
    [[TestPaths::REPO, "spec/vectors", everything], [CLIENT, "../../spec/vectors", quiet]].each do |dir, vectors, files|
      reports, err, code = runner(*files.map { |file| "#{vectors}/#{file}" }, dir: dir, env: env)
      assert_equal [0, ""], [code, err], dir
      assert_equal(files, reports.map { |r| r["file"] })
      reports.each do |report|
        cases = Conformance.cases(File.join(TestPaths::VECTORS, report["file"])).size
        assert_equal({ "language" => "ruby", "file" => report["file"], "status" => "pass", "cases" => cases,
                       "failed" => [], "reason" => nil }, report)
      end
    end
  end

  # spec/vectors/README.md: a runner that lacks a variable it needs reports `fail` with that reason, never
  # not_applicable.
  def test_a_missing_server_variable_fails_with_its_name
    unset = { "LARDER_CONFORMANCE_MEMCACHED" => nil, "LARDER_CONFORMANCE_REDIS" => nil, "LARDER_HOSTILE" => nil }
    reports, _, code = runner("spec/vectors/hostile_keys.json", "spec/vectors/hostile_replies.json", env: unset)
    assert_equal 0, code
    assert_equal(%w[fail fail], reports.map { |r| r["status"] })
    assert_match(/\$LARDER_CONFORMANCE_MEMCACHED is not set/, reports[0]["reason"])
    assert_match(/\$LARDER_HOSTILE is not set/, reports[1]["reason"])
  end

  def test_every_storage_case_is_run_and_passes
    reports, = runner("spec/vectors/storage.json")
    expected = [["pass", TestPaths.vectors("storage")["cases"].size + 1]] # and the file's shape
    assert_equal(expected, reports.map { |r| [r["status"], r["cases"]] })
  end

  def test_a_failing_case_is_named_with_what_it_got
    document = TestPaths.vectors("storage")
    wrong = document["cases"].find { |c| c["name"] == "method_get" }
    wrong["expected"] = { "stored" => false, "reason" => "method" }
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "storage.json"), JSON.generate(document))
      (report,), _, code = runner(File.join(dir, "storage.json"))
      assert_equal 0, code
      assert_equal ["fail", document["cases"].size + 1, ["method_get"]], report.values_at("status", "cases", "failed")
      assert_match(/\Amethod_get: .*"stored" ?=> ?true/, report["reason"])
    end
  end

  def test_a_malformed_storage_file_fails_its_shape
    document = TestPaths.vectors("storage")
    document["cases"].last["note"] = ""
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "storage.json"), JSON.generate(document))
      (report,), = runner(File.join(dir, "storage.json"))
      assert_equal ["fail", ["file-shape"]], report.values_at("status", "failed")
      assert_match(/\Afile-shape: #{document["cases"].last["name"]} has a note/, report["reason"])
    end
  end

  def test_an_unknown_or_unreadable_file_fails_with_a_reason
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "future.json"), '{"schema": 1, "cases": []}')
      File.write(File.join(dir, "keys.json"), "not json")
      reports, _, code = runner(File.join(dir, "future.json"), File.join(dir, "keys.json"),
                                File.join(dir, "missing", "ring.json"))
      assert_equal 0, code, "the runner could judge them: each is a failure, not a crash"
      assert_equal(%w[fail fail fail], reports.map { |r| r["status"] })
      assert_match(/future\.json is not a vector file this runner knows/, reports[0]["reason"])
      assert_match(/cannot read .*keys\.json/, reports[1]["reason"])
      assert_match(/cannot read .*ring\.json/, reports[2]["reason"])
    end
  end

  def test_no_file_is_a_usage_error
    reports, err, code = runner
    assert_equal [[], 2], [reports, code]
    assert_match(/usage: /, err)
  end
end
