# frozen_string_literal: true

require_relative "test_helper"

# Store URL options (spec/STORES.md §1): durations are a bare number of milliseconds, or a number with exactly one of
# the units ms, s, m, h; nothing else.
class StoreUrlTest < Minitest::Test
  def duration(text)
    Larder::StoreUrl.parse("memcached://h:1?timeout=#{text}").take_duration("timeout", 0)
  end

  def test_durations_accepted
    { "250" => 250, "250ms" => 250, "2s" => 2000, "1m" => 60_000, "1h" => 3_600_000, "0" => 0,
      "999999999999h" => 999_999_999_999 * 3_600_000 }.each do |text, ms|
      assert_equal ms, duration(text), text
    end
  end

  def test_durations_refused
    ["soon", "", "1min", "2d", "1s500ms", "1.5s", "-1s", "+1s", "s", "1 s", "%201s", "1s%20", "1S", "1MS",
     "1e3", "0x10", "1_000", "9999999999999", "99999999999999h", "1s%0A"].each do |text|
      error = assert_raises(Larder::UrlError, text) { duration(text) }
      assert_includes error.message, "not a duration", text
      assert_includes error.message, "timeout", text
    end
  end

  def test_default_when_absent
    assert_equal 250, Larder::StoreUrl.parse("memcached://h:1").take_duration("timeout", 250)
  end

  def test_stores_use_the_same_rule
    error = assert_raises(Larder::UrlError) { Larder::Stores.open("memcached://127.0.0.1:1?retry_after=1.5s") }
    assert_includes error.message, "retry_after"
    error = assert_raises(Larder::UrlError) { Larder::Stores.open("redis://127.0.0.1:1?timeout=2d") }
    assert_includes error.message, "timeout"
  end
end
