# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "stringio"
require "larder/cli"

# The Ruby and Rust `larder encode|inspect|key` side by side (spec/CLI.md): same entry bytes from `encode` when the
# payload is stored uncompressed, each decoding the other's entries to equal values, byte-identical `inspect` and
# `key` output, and the same exit status and error kind for every invalid entry. The Rust binary must be built
# (`cargo build -p larder-cli`); without it these tests fail.
class CliCrossLanguageTest < Minitest::Test
  Run = Struct.new(:status, :stdout, :stderr)

  ENTRIES = TestPaths.vectors("entries")["cases"]
  INVALID = TestPaths.vectors("invalid")["cases"]
  HTTP_KEYS = TestPaths.vectors("keys")["http"]

  # The gem's executable is larder-rb (a `larder` would shadow the Rust binary) and runs this CLI.
  def test_the_gems_executable_is_larder_rb
    spec = Gem::Specification.load(File.expand_path("../larder.gemspec", __dir__))
    assert_equal ["larder-rb"], spec.executables
    assert_equal %w[Apache-2.0 MIT], spec.licenses.sort
    out, status = Open3.capture2(RbConfig.ruby, File.expand_path("../bin/larder-rb", __dir__), "key",
                                 "https://shop.example/p?b=2&a=1")
    assert status.success?
    assert_equal "GET:https://shop.example/p?a=1&b=2\n", out
  end

  def rust(args, stdin = "", env: {})
    out, err, status = Open3.capture3(env, TestPaths.rust_bin, *args, stdin_data: stdin, binmode: true)
    Run.new(status.exitstatus, out.b, err)
  end

  def ruby(args, stdin = "", env: {})
    saved = env.to_h { |k, _| [k, ENV.fetch(k, nil)] }
    env.each { |k, v| ENV[k] = v }
    out = StringIO.new(+"".b)
    err = StringIO.new(+"")
    status = Larder::CLI.main(args, stdin: StringIO.new(stdin.b), stdout: out, stderr: err)
    Run.new(status, out.string.b, err.string)
  ensure
    saved&.each { |k, v| ENV[k] = v }
  end

  def assert_same(args, stdin = "", env: {})
    expected = rust(args, stdin, env: env)
    actual = ruby(args, stdin, env: env)
    assert_equal expected.status, actual.status, "exit status of #{args.inspect}: rust said #{expected.stderr}"
    assert_equal expected.stdout, actual.stdout, "stdout of #{args.inspect}"
    if expected.status != 0
      assert_match(/\Alarder: [^\n]*\n\z/, actual.stderr)
      assert_match(/\Alarder: [^\n]*\n\z/, expected.stderr)
    end
    [expected, actual]
  end

  ENTRIES.each do |vector|
    define_method("test_inspect_#{vector['name']}") do
      data = [vector["entry_hex"]].pack("H*")
      expected, = assert_same(["inspect"], data)
      assert_equal 0, expected.status
      assert_same(["inspect", "--json"], data)
      assert_same(["inspect", "--body"], data)
    end
  end

  INVALID.each do |vector|
    define_method("test_invalid_#{vector['name']}") do
      data = [vector["entry_hex"]].pack("H*")
      expected, actual = assert_same(["inspect", "--max-size", (vector["max_size"] || 67_108_864).to_s], data)
      assert_equal 1, expected.status
      assert_equal "larder: invalid entry: #{vector['error']}:", actual.stderr[/\A[^:]+: [^:]+: [^:]+:/]
      assert_equal expected.stderr[/\A[^:]+: [^:]+: [^:]+:/], actual.stderr[/\A[^:]+: [^:]+: [^:]+:/]
    end
  end

  HTTP_KEYS.each do |vector|
    define_method("test_key_#{vector['name']}") do
      args = ["key", vector["url"], "--method", vector["method"]]
      args += ["--namespace", vector["namespace"]] if vector["namespace"]
      if vector["drop"]
        args << "--no-default-drops"
        vector["drop"].each { |pattern| args += ["--drop", pattern] }
      end
      expected, = assert_same(args)
      assert_equal "#{vector['key']}\n", expected.stdout
    end
  end

  DOCUMENTS = [
    '{"id":7,"name":"Ada"}', "[1,-1,127,128,-32,-33,255,256,65535,65536,4294967296,-2147483649,18446744073709551615]",
    "[0.1,1.0,-0.0,1e16,1.5e-07,123456789.0,1e15,0.0001,1e-05,3.141592653589793]", '"héllo ☃ \\u0001"',
    '{"b":1,"a":{"z":[true,false,null]},"b":2}', "null", "{}", "[]",
    "[#{'[' * 99}1#{']' * 99}]", %({"k":"#{'x' * 2000}"})
  ].freeze

  def test_encode_is_byte_identical_when_uncompressed
    # JSON payloads may differ in number formatting (FORMAT.md §6), so byte identity is checked for msgpack.
    DOCUMENTS.each do |document|
      args = ["encode", "--compressor", "none", "--created-at", "1700000000000", "--ttl", "60", "--stale", "5",
              "--version", "v1", "--tag", "a", "--tag", "b"]
      expected, = assert_same(args, document)
      assert_equal 0, expected.status, expected.stderr
      assert_same(["inspect"], expected.stdout)
      json_entry = ruby(args + ["--serializer", "json"], document).stdout
      assert_equal rust(["inspect", "--json"], json_entry).stdout, ruby(["inspect", "--json"], json_entry).stdout
    end
  end

  def test_compressed_entries_decode_in_the_other_language
    document = JSON.generate((1..200).map { |i| { "id" => i, "name" => "user#{i}", "ok" => i.even? } })
    Larder::Header::COMPRESSORS.each do |compressor|
      %w[msgpack json].each do |serializer|
        args = ["encode", "--serializer", serializer, "--compressor", compressor, "--created-at", "0"]
        from_rust = rust(args, document)
        from_ruby = ruby(args, document)
        assert_equal 0, from_ruby.status, from_ruby.stderr
        assert_equal compressor, Larder.decode(from_ruby.stdout).compressor
        assert_equal JSON.parse(document), Larder.decode(from_rust.stdout).value
        value_line = ->(run) { run.stdout.lines.last }
        assert_equal value_line.call(rust(["inspect"], from_rust.stdout)),
                     value_line.call(rust(["inspect"], from_ruby.stdout))
        assert_same(["inspect", "--json"], from_rust.stdout)
      end
    end
  end

  def test_text_raw_and_response_encodings_are_byte_identical
    assert_same(%w[encode --serializer text --compressor none --created-at 0], "hi\n")
    assert_same(%w[encode --serializer raw --created-at 0], "\xFF\x00bytes".b)
    assert_same(%w[encode --serializer raw --json-input --created-at 0], '{"$base64":"/wA="}')
    assert_same(%w[encode --serializer text --json-input --created-at 0], '"a string"')
    response = '{"status":301,"headers":[["location","/x"],["set-cookie","a=1"],["set-cookie","b=2"]],' \
               '"body":{"$base64":"AAE="},"content_encoding":"GZIP"}'
    expected, = assert_same(%w[encode --kind response --compressor none --created-at 5 --ttl 9], response)
    assert_same(["inspect"], expected.stdout)
    assert_same(["inspect", "--json", "--body"], expected.stdout)
  end

  def test_bad_input_and_usage_errors_exit_alike
    [
      [["encode", "--serializer", "text"], "\xFF".b], [["encode"], "{"], [["encode"], "[1] 2"],
      [["encode"], "#{'[' * 101}#{']' * 101}"], [["encode", "--serializer", "json"], "1e400"],
      [["encode", "--serializer", "foo"], ""], [["encode", "--ttl", "1", "--ttl", "2"], "1"],
      [["encode", "--ttl", "-1"], "1"], [["encode", "--bogus"], "1"], [%w[key no-scheme], ""],
      [["key"], ""], [["encode", "--kind", "response", "--serializer", "json"], "{}"],
      [["encode", "--kind", "response"], '{"status":"200"}'], [[], ""], [["frobnicate"], ""],
      [["inspect", "/nonexistent/file"], ""]
    ].each do |args, stdin|
      expected, = assert_same(args, stdin)
      assert_equal 2, expected.status, args.inspect
    end
  end

  def test_terminal_output_is_cut_alike
    text = rust(%w[encode --serializer text --compressor none --created-at 0], "x" * 300).stdout
    env = { "LARDER_FORCE_TTY" => "1" }
    _, actual = assert_same(["inspect"], text, env: env)
    assert_includes actual.stdout, "… (102 more characters)".b
    assert_same(["inspect", "--body"], text, env: env)
    assert_same(["inspect", "--full", "--body"], text, env: env)
    assert_same(["inspect", "--body"], text, env: { "LARDER_FORCE_TTY" => "0" })
  end

  def test_generated_floats_display_alike
    random = Random.new(7)
    floats = Array.new(300) { [random.rand * (10**random.rand(-30..30)), -random.rand * 1e-300].sample(random: random) }
    floats += [5e-324, 1.7976931348623157e308, 2.0**53, 9_007_199_254_740_993.0, 0.30000000000000004]
    document = JSON.generate(floats)
    expected, = assert_same(%w[encode --compressor none --created-at 0], document)
    assert_same(["inspect", "--json"], expected.stdout)
  end

  def test_extra_key_flags_match
    [
      ["key", "http://a.example:80/?b=1&utm_x=2&a=3", "--method", "post"],
      ["key", "https://u:p@A.example:8443/p?x=1#f", "--drop", "x"],
      ["key", "http://a.example/#{'p' * 300}", "--namespace", "ns"],
      ["key", "http://a.example?z&y=1&&x"]
    ].each { |args| assert_same(args) }
  end
end
