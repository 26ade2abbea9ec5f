# frozen_string_literal: true

require_relative "test_helper"
require "larder/stores/remote"
require_relative "conformance/outage"

# A remote server's failure and recovery (spec/STORES.md §1; Larder::Stores::Health): ejection after `failures`
# consecutive failures, then probation with one probe at a time, every other request refused at once while it is out.
class HealthTest < Minitest::Test
  Health = Larder::Stores::Health

  def health
    Health.new("h:1", failures: 2, retry_after_ms: 1000)
  end

  def test_ejected_after_consecutive_failures_and_refused_until_retry_after
    h = health
    assert_equal true, h.admit(0)
    refute h.failure(0), "one failure does not eject"
    h.success
    refute h.failure(10), "a good answer reset the count"
    assert h.failure(20), "the second in a row ejects"
    refute h.admit(500)
    refute h.available?(500)
    assert h.available?(1020), "in the ring again once retry_after has passed"
  end

  def test_one_probe_at_a_time_and_its_success_puts_the_server_back
    h = health
    2.times { h.failure(0) }
    assert_equal Health::PROBE, h.admit(1000), "the first request after retry_after probes"
    assert h.probing?
    5.times { refute h.admit(1001), "every other request is refused while the probe is out" }
    h.success
    h.probe_over
    refute h.probing?
    assert_equal true, h.admit(1002), "back in service"
    refute h.failure(1003), "in service again: one failure does not eject"
  end

  def test_the_probes_failure_ejects_again
    h = health
    2.times { h.failure(0) }
    assert_equal Health::PROBE, h.admit(1000)
    assert h.failure(1100), "one failure on probation ejects"
    h.probe_over
    refute h.admit(1500)
    assert_equal Health::PROBE, h.admit(2100), "probed again after another retry_after"
  end

  def test_a_probe_that_ends_without_an_answer_lets_the_next_request_probe
    h = health
    2.times { h.failure(0) }
    assert_equal Health::PROBE, h.admit(1000)
    h.probe_over
    assert_equal Health::PROBE, h.admit(1001)
  end

  def test_concurrent_admits_give_one_probe
    h = health
    2.times { h.failure(0) }
    answers = Array.new(16) { Thread.new { h.admit(Larder.now_ms) } }.map(&:value)
    assert_equal 1, answers.count(Health::PROBE)
    assert_equal 15, answers.count(false)
  end

  # Through larder-faults: a frozen server, once its ejection is over, makes one request wait for `timeout`, not
  # every request that arrives meanwhile.
  def test_a_frozen_server_is_probed_by_one_request_memcached
    frozen_server_probed_once("memcached", Servers.shared_memcached)
  end

  def test_a_frozen_server_is_probed_by_one_request_redis
    frozen_server_probed_once("redis", Servers.redis)
  end

  private

  def frozen_server_probed_once(kind, server)
    faults = ENV.fetch("LARDER_FAULTS", File.join(TestPaths::REPO, "target", "debug", "larder-faults"))
    Conformance::Outage::Proxy.run(faults, server) do |proxy|
      store = Larder::Stores.open(Conformance::Outage.url(kind, proxy.address,
                                                          "timeout=150ms&retry_after=300ms&failures=1"))
      store.set("k", "v")
      proxy.command("freeze")
      assert_raises(Larder::StoreError) { store.get("k") }
      sleep 0.35
      took = Array.new(8) { Thread.new { timed { store.get("k") } } }.map(&:value)
      assert_equal 1, took.count { |seconds| seconds >= 0.1 }, "one probe waits for the timeout: #{took.inspect}"
      proxy.command("pass")
      sleep 0.35
      assert_equal "v", store.get("k"), "a good probe puts the server back"
      store.close
    end
  end

  def timed
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    begin
      yield
    rescue Larder::StoreError
      nil
    end
    Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  end
end
