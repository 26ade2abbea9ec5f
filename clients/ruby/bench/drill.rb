# frozen_string_literal: true

# The fetch drill (issue 33, deliverable 4; the contract every language's drill program follows is the one
# bench/drills.py runs): Larder::Cache#fetch under sustained load while a harness freezes, kills, slows and restarts
# the store behind larder-faults. `workers` threads each loop until `seconds` have passed: pick n uniformly in
# [0, keys), fetch("drill:<n>", ttl: ttl-ms) with a loader that counts one load, sleeps loader-ms and returns a
# query-result-like value (a Hash holding 25 small Hashes, about 800 bytes in MessagePack). The cache is opened on the
# URL as given, with its default options (the outage memory on, 16M).
#
# Standard output, one JSON object per line, flushed at once: every interval-ms
#   {"t_ms":…,"calls":…,"errors":…,"loads":…,"p50_ms":…,"p99_ms":…,"max_ms":…}
# (calls completed in the interval, errors among them, loader runs started in it; latencies of the calls completed
# in it, 0 when none), then {"done":true,"calls":…,"errors":…,"loads":…}, the sums of the interval lines. Calls still
# in flight at the end are waited for GRACE seconds (their interval line is the last one, t_ms after `seconds`), then
# abandoned (not counted; their number goes to standard error, with the cache's stats), so the program ends within
# GRACE of `seconds` however the store behaves. Exit 0, even with errors; 2 on bad arguments.
#
#   ruby clients/ruby/bench/drill.rb --store memcached://127.0.0.1:11211 --seconds 10
#   ruby clients/ruby/bench/drill.rb --store redis://127.0.0.1:6379/0 --seconds 30 --workers 32 --keys 500
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "json"
require "optparse"
require "larder"
require "larder/cache"

# The drill: options, counters, the worker threads and the reporter.
class Drill
  # How long calls in flight at the end are waited for before they are abandoned (the contract allows 2 s).
  GRACE = 1.0
  DEFAULTS = { workers: 16, keys: 50, ttl_ms: 60_000, loader_ms: 20, interval_ms: 250 }.freeze
  INTEGER_OPTIONS = {
    workers: ["--workers N", "concurrent callers, threads (default 16)"],
    keys: ["--keys N", "distinct keys, drill:0 to drill:N-1 (default 50)"],
    ttl_ms: ["--ttl-ms MS", "the entries' TTL in milliseconds (default 60000)"],
    loader_ms: ["--loader-ms MS", "how long the loader sleeps, milliseconds (default 20; 0 allowed)"],
    interval_ms: ["--interval-ms MS", "milliseconds between two report lines (default 250)"]
  }.freeze

  # The options, or a usage message on stderr and exit 2 (`--help`: the usage on stdout, exit 0).
  def self.options(argv)
    options = DEFAULTS.dup
    parser = option_parser(options)
    begin
      rest = parser.parse(argv)
      raise OptionParser::InvalidArgument, "unexpected #{rest.join(' ')}" unless rest.empty?
      raise OptionParser::MissingArgument, "--store" unless options[:store]
      raise OptionParser::MissingArgument, "--seconds" unless options[:seconds]
    rescue OptionParser::ParseError => e
      warn "drill.rb: #{e.message}", parser.help
      exit 2
    end
    options
  end

  def self.option_parser(options)
    OptionParser.new do |parser|
      parser.banner = "usage: ruby bench/drill.rb --store URL --seconds S [--workers 16] [--keys 50] " \
                      "[--ttl-ms 60000] [--loader-ms 20] [--interval-ms 250]\n\n" \
                      "Larder::Cache#fetch under load (issue 33's drill): WORKERS threads fetch drill:<n> for S " \
                      "seconds,\nn uniform in [0, KEYS); one JSON line per interval on stdout, then a done line."
      parser.separator ""
      parser.on("--store URL", String, "the store's URL, as given to Larder::Cache.new (required)") do |url|
        options[:store] = url
      end
      parser.on("--seconds S", Float, "how long the workers run (required, > 0)") do |seconds|
        positive!(seconds)
        options[:seconds] = seconds
      end
      INTEGER_OPTIONS.each do |name, (flag, help)|
        parser.on(flag, Integer, help) do |value|
          positive!(value, zero: name == :loader_ms)
          options[name] = value
        end
      end
      parser.on("-h", "--help", "this help") do
        puts parser.help
        exit 0
      end
    end
  end

  def self.positive!(value, zero: false)
    return if value.positive? || (zero && value.zero?)

    raise OptionParser::InvalidArgument, "(must be #{zero ? 'at least 0' : 'more than 0'})"
  end

  def initialize(options)
    @options = options
    @cache = Larder::Cache.new(options[:store])
    @mutex = Mutex.new
    @latencies = []
    @counts = Hash.new(0)
    @totals = Hash.new(0)
    @in_flight = 0
    @stop = false
    @logged_errors = 0
  end

  def run
    @start = now
    deadline = @start + @options[:seconds]
    workers = Array.new(@options[:workers]) { |index| Thread.new { work(Random.new(@start.hash ^ index), deadline) } }
    report_until(deadline)
    @stop = true
    finish(workers, deadline + GRACE)
  end

  private

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def work(random, deadline)
    ttl = @options[:ttl_ms] / 1000.0
    until @stop || now >= deadline
      n = random.rand(@options[:keys])
      @mutex.synchronize { @in_flight += 1 }
      began = now
      failed = false
      begin
        @cache.fetch("drill:#{n}", ttl: ttl) { load(n) }
      rescue StandardError => e
        failed = e
      end
      completed((now - began) * 1000.0, failed)
      # Hands the GVL on after each call: without it a thread keeps it for its whole 100 ms slice, the reporter's
      # lines come up to half a second late and the latencies measure the wait for the GVL more than the cache.
      Thread.pass
    end
  end

  # The app's query: one load, loader-ms of work, a result of 25 rows.
  def load(number)
    @mutex.synchronize { @counts[:loads] += 1 }
    sleep(@options[:loader_ms] / 1000.0) if @options[:loader_ms].positive?
    { "id" => number, "rows" => (0...25).map { |j| { "i" => j, "name" => "row #{j}", "score" => j * 1.5 } } }
  end

  # `error`: what the fetch raised, or false. The first ten errors are logged on stderr.
  def completed(latency_ms, error)
    log = @mutex.synchronize do
      @in_flight -= 1
      @counts[:calls] += 1
      @latencies << latency_ms
      next false unless error

      @counts[:errors] += 1
      (@logged_errors += 1) <= 10
    end
    warn "drill.rb: fetch failed: #{error.class}: #{error.message}" if log
  end

  # One line per interval, each due at start + k * interval (no drift; a boundary the thread woke too late for is
  # skipped, its calls going to the next line), the last at the deadline.
  def report_until(deadline)
    interval = @options[:interval_ms] / 1000.0
    loop do
      due = [@start + (interval * (((now - @start) / interval).floor + 1)), deadline].min
      pause = due - now
      sleep(pause) if pause.positive?
      report
      break if now >= deadline
    end
  end

  def report
    latencies, counts = @mutex.synchronize do
      taken = [@latencies, @counts]
      @latencies = []
      @counts = Hash.new(0)
      taken
    end
    t_ms = ((now - @start) * 1000).round
    %i[calls errors loads].each { |name| @totals[name] += counts[name] }
    latencies.sort!
    emit(t_ms: t_ms, calls: counts[:calls], errors: counts[:errors], loads: counts[:loads],
         p50_ms: percentile(latencies, 0.50), p99_ms: percentile(latencies, 0.99), max_ms: percentile(latencies, 1.0))
  end

  # Nearest rank.
  def percentile(sorted, fraction)
    return 0.0 if sorted.empty?

    sorted[[(fraction * sorted.size).ceil - 1, 0].max].round(3)
  end

  def emit(line)
    $stdout.puts(JSON.generate(line))
    $stdout.flush
  end

  # Waits for the calls in flight until `limit`, reports them, prints the totals and ends the process: at once
  # (exit!) when some are still stuck, so that no thread blocked on the store delays the exit.
  def finish(workers, limit)
    workers.each { |worker| worker.join([limit - now, 0].max) }
    stuck = @mutex.synchronize { @in_flight }
    report if @mutex.synchronize { @counts.values.any?(&:positive?) }
    emit(done: true, calls: @totals[:calls], errors: @totals[:errors], loads: @totals[:loads])
    warn "drill.rb: #{stuck} fetch(es) still in flight after #{GRACE} s, abandoned" if stuck.positive?
    warn "drill.rb: cache stats #{@cache.stats.sort.to_h}"
    $stderr.flush
    exit!(0) if stuck.positive?
    @cache.store.close if @cache.store.respond_to?(:close)
  end
end

options = Drill.options(ARGV)
$stdout.sync = true
begin
  drill = Drill.new(options)
rescue ArgumentError, Larder::StoreError, Larder::ConfigurationError, Larder::MissingLibrary => e
  warn "drill.rb: --store #{options[:store]}: #{e.message}"
  exit 2
end
drill.run
