# frozen_string_literal: true

require_relative "test_helper"
require "redis" # the gem, to look at the server from outside
require "rubygems/package"
require "larder/stores/redis_scripts"

# The Redis store runs spec/redis's scripts byte for byte (spec/STORES.md §5 "Scripts"): the bytes it loads are the
# files', by EVALSHA with EVAL when the server lacks them, and a gem built with `rake build` carries them and uses
# them with no repository around it.
class RedisScriptsTest < Minitest::Test
  SPEC_REDIS = File.join(TestPaths::REPO, "spec", "redis")
  SCRIPTS = Larder::Stores::RedisScripts

  def test_the_loaded_bytes_are_spec_rediss_files
    assert_equal Dir[File.join(SPEC_REDIS, "*.lua")].map { |path| File.basename(path, ".lua") }.sort, SCRIPTS::NAMES
    assert_equal SCRIPTS::CHECKOUT, SCRIPTS.directory, "a checkout reads spec/redis (no packaged copy left over)"
    SCRIPTS::NAMES.each do |name|
      bytes = File.binread(File.join(SPEC_REDIS, "#{name}.lua"))
      script = SCRIPTS.fetch(name)
      assert_equal bytes, script.source, name
      assert_equal Digest::SHA1.hexdigest(bytes), script.sha1
    end
  end

  def test_evalsha_first_and_eval_only_when_the_server_lacks_the_script
    store = Larder::Stores.open("redis://#{Servers.redis}/0")
    raw = ::Redis.new(url: "redis://#{Servers.redis}/0")
    raw.call("SCRIPT", "FLUSH")
    shas = SCRIPTS::NAMES.map { |name| SCRIPTS.fetch(name).sha1 }
    assert_equal [0, 0, 0], raw.call("SCRIPT", "EXISTS", *shas)
    first = calls(raw) { use_every_script(store, "first") }
    assert_equal [1, 1, 1], raw.call("SCRIPT", "EXISTS", *shas), "EVAL loaded each script"
    assert_equal 3, first["eval"], "one EVAL per script the server lacked"
    second = calls(raw) { use_every_script(store, "second") }
    assert_equal [0, 3], [second["eval"], second["evalsha"]], "then EVALSHA alone"
  ensure
    raw&.close
    store&.close
  end

  def test_a_built_gem_carries_the_scripts_and_uses_them_outside_a_checkout
    Dir.mktmpdir do |dir|
      checkout = File.join(dir, "repo", "clients", "ruby")
      FileUtils.mkdir_p([checkout, File.join(dir, "repo", "spec")])
      FileUtils.cp_r(SPEC_REDIS, File.join(dir, "repo", "spec"))
      client = File.expand_path("..", __dir__)
      %w[lib bin README.md Rakefile larder.gemspec].each { |part| FileUtils.cp_r(File.join(client, part), checkout) }
      _, err, status = Open3.capture3("rake", "build", chdir: checkout)
      assert status.success?, err
      refute File.exist?(File.join(checkout, "lib/larder/stores/redis_scripts")), "the copy is removed after"
      gem = Dir[File.join(checkout, "pkg", "*.gem")].first
      installed = File.join(dir, "elsewhere")
      Gem::Package.new(gem).extract_files(installed)
      SCRIPTS::NAMES.each do |name|
        assert_equal File.binread(File.join(SPEC_REDIS, "#{name}.lua")),
                     File.binread(File.join(installed, "lib/larder/stores/redis_scripts/#{name}.lua"))
      end
      code = 'require "larder"; require "larder/stores/redis_scripts"; s = Larder::Stores::RedisScripts; ' \
             'print s.directory, "|", s.fetch("tag").sha1'
      out, err, status = Open3.capture3(RbConfig.ruby, "-I", File.join(installed, "lib"), "-e", code, chdir: dir)
      assert status.success?, err
      assert_equal "#{File.join(installed, 'lib/larder/stores/redis_scripts')}|#{SCRIPTS.fetch('tag').sha1}", out
    end
  end

  def test_a_lib_without_the_scripts_refuses_to_open_a_redis_store
    Dir.mktmpdir do |dir|
      FileUtils.cp_r(File.expand_path("../lib", __dir__), dir)
      code = 'require "larder"; begin; Larder::Stores.open("redis://127.0.0.1:1"); rescue Larder::ConfigurationError ' \
             "=> e; print e.message; end"
      out, err, status = Open3.capture3(RbConfig.ruby, "-I", File.join(dir, "lib"), "-e", code, chdir: dir)
      assert status.success?, err
      assert_match(/the Redis scripts .* are in neither .*`rake build`/, out)
    end
  end

  private

  # A counter, a tagged write (the pipelined path) and a lock release: each of the three scripts once.
  def use_every_script(store, name)
    key = "scripts-test:#{name}:#{SecureRandom.hex(4)}"
    assert_equal 2, store.incr("#{key}:n", 2)
    store.set("#{key}:tagged", Larder.encode("v", ttl_ms: 60_000, tags: ["scripts-test-#{name}"]))
    store.set("#{key}:lock", "token")
    assert store.delete_if("#{key}:lock", "token")
  end

  # How many times EVAL and EVALSHA ran while the block did (Redis's command statistics).
  def calls(raw)
    before = command_calls(raw)
    yield
    after = command_calls(raw)
    %w[eval evalsha].to_h { |name| [name, after[name] - before[name]] }
  end

  def command_calls(raw)
    stats = raw.info("commandstats")
    %w[eval evalsha].to_h { |name| [name, stats.dig(name, "calls").to_i] }
  end
end
