# frozen_string_literal: true

require "open3"
require "securerandom"
require "larder/cache"

module Conformance
  # outage.json (spec/vectors/README.md, "outage.json"; spec/STORES.md §3, "When the store fails"): `fetch` on a
  # cache whose store sits behind larder-faults, a fault proxy in front of a real memcached or Redis. Each case starts
  # `$LARDER_FAULTS` in front of LARDER_CONFORMANCE_MEMCACHED or LARDER_CONFORMANCE_REDIS, opens the *faulted* cache
  # over the proxy (the case's url_query, default options otherwise: outage memory on) and a *direct* cache over the
  # server, both under one fresh random namespace, and runs the steps in order; a failure names the step.
  module Outage
    TTL = 60
    SERVERS = { "memcached" => "LARDER_CONFORMANCE_MEMCACHED", "redis" => "LARDER_CONFORMANCE_REDIS" }.freeze
    # How long larder-faults may take to print its address or answer a command.
    ANSWER_S = 10
    # Beyond a round's bound, how long the runner waits for its callers before it gives up on them.
    STUCK_S = 10

    module_function

    # What the cases run on: a Larder::Cache for the store URL and namespace (the suite also runs them on
    # ActiveSupport's LarderStore, through an object that answers the same calls).
    LARDER_CACHE = ->(url, namespace) { Larder::Cache.new(url, namespace: namespace) }

    # `open`: the cache of a case for a store URL and a namespace, answering fetch(key, ttl:), write(key, value, ttl:),
    # read(key), clear and store (the Larder store, closed after the case).
    def cases(document, open: LARDER_CACHE)
      document.fetch("cases").map do |vector|
        unless SERVERS.key?(vector["store"])
          raise ArgumentError, "#{vector['name']}: unknown store #{vector['store'].inspect}"
        end

        [vector.fetch("name"), ->(test) { check(test, vector, open) }]
      end
    end

    def check(test, vector, open)
      server = Hostile.env(test, SERVERS.fetch(vector["store"]))
      faults = Hostile.env(test, "LARDER_FAULTS")
      namespace = "outage-#{SecureRandom.hex(8)}"
      Proxy.run(faults, server) do |proxy|
        faulted = open.call(url(vector["store"], proxy.address, vector.fetch("url_query")), namespace)
        direct = open.call(url(vector["store"], server, ""), namespace)
        begin
          vector.fetch("steps").each_with_index do |step, index|
            Step.new(test, "step #{index + 1} (#{step.keys.first})", faulted, direct, proxy).run(step)
          end
        ensure
          faulted.store.close
          direct.store.close
        end
      end
    end

    def url(store, address, query)
      base = store == "memcached" ? "memcached://#{address}" : "redis://#{address}/0"
      query.empty? ? base : "#{base}?#{query}"
    end

    def clock
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # One step of a case, on its two caches and its proxy.
    class Step
      def initialize(test, label, faulted, direct, proxy)
        @test = test
        @label = label
        @faulted = faulted
        @direct = direct
        @proxy = proxy
      end

      def run(step)
        if step.key?("fault") then @proxy.command(step["fault"])
        elsif step.key?("burst") then burst(step["burst"], step.fetch("expect"))
        elsif step.key?("write_direct") then write_direct(step["write_direct"])
        elsif step.key?("read_direct") then read_direct(step["read_direct"])
        elsif step.key?("flush_direct") then @direct.clear
        elsif step.key?("await_value") then await_value(step["await_value"])
        else
          raise ArgumentError, "#{@label}: unknown step #{step.keys.inspect}"
        end
      end

      private

      def write_direct(step)
        @test.assert @direct.write(step.fetch("key"), step.fetch("value"), ttl: TTL),
                     "#{@label}: the direct cache did not write #{step['key']}"
      end

      def read_direct(step)
        @test.assert_equal step.fetch("value"), @direct.read(step.fetch("key")),
                           "#{@label}: the direct cache read #{step['key']}"
      end

      # `rounds` rounds of `callers` concurrent fetches, each checked; then the loader's count over the step.
      def burst(burst, expect)
        loads = Loads.new(burst.fetch("loader_value"), burst.fetch("loader_ms") / 1000.0)
        burst.fetch("rounds").times { |round| round(burst, expect, loads, "#{@label}, round #{round + 1}") }
        if expect.key?("loads")
          @test.assert_equal expect["loads"], loads.count, "#{@label}: the loader ran #{loads.count} times"
        else
          @test.assert_operator loads.count, :<=, expect.fetch("loads_at_most"),
                                "#{@label}: the loader ran #{loads.count} times"
        end
      end

      def round(burst, expect, loads, label)
        key = burst.fetch("key")
        bound = expect.fetch("round_within_ms") / 1000.0
        started = Outage.clock
        callers = Array.new(burst.fetch("callers")) { Thread.new { fetch(key, loads) } }
        outcomes = callers.map { |thread| thread.join([started + bound + STUCK_S - Outage.clock, 0].max)&.value }
        took = Outage.clock - started
        stuck = outcomes.count(&:nil?)
        @test.flunk("#{label}: #{stuck} of #{callers.size} fetches had not returned after #{took.round(1)} s") if
          stuck.positive?
        outcomes.each_with_index do |(kind, value), index|
          @test.flunk("#{label}: fetch #{index + 1} raised #{value.class}: #{value.message}") if kind == :error
          @test.assert_equal expect.fetch("value"), value, "#{label}: fetch #{index + 1} returned"
        end
        @test.assert_operator took * 1000, :<=, expect.fetch("round_within_ms"),
                              "#{label}: the round took #{(took * 1000).round} ms"
      end

      def fetch(key, loads)
        [:value, @faulted.fetch(key, ttl: TTL) { loads.call }]
      rescue StandardError => e
        [:error, e]
      end

      # One fetch every 100 ms until it returns `value`.
      def await_value(step)
        loads = Loads.new(step.fetch("loader_value"), 0)
        deadline = Outage.clock + (step.fetch("within_ms") / 1000.0)
        last = nil
        loop do
          last = begin
            @faulted.fetch(step.fetch("key"), ttl: TTL) { loads.call }
          rescue StandardError => e
            "#{e.class}: #{e.message}"
          end
          return if last == step.fetch("value")

          @test.flunk("#{@label}: fetch still returned #{last.inspect} after #{step['within_ms']} ms") if
            Outage.clock >= deadline
          sleep 0.1
        end
      end
    end

    # The loader of a step: sleeps, counts its calls, returns its value.
    class Loads
      def initialize(value, seconds)
        @value = value
        @seconds = seconds
        @count = 0
        @mutex = Mutex.new
      end

      def call
        sleep @seconds if @seconds.positive?
        @mutex.synchronize { @count += 1 }
        @value
      end

      def count
        @mutex.synchronize { @count }
      end
    end

    # A larder-faults process in front of `server`: its address, and commands written to its standard input.
    class Proxy
      attr_reader :address

      def self.run(binary, server)
        proxy = new(binary, server)
        yield proxy
      ensure
        proxy&.stop
      end

      def initialize(binary, server)
        raise "LARDER_FAULTS: #{binary} is not an executable (cargo build -p larder-testkit --bins)" unless
          File.executable?(binary)

        @input, @output, @process = Open3.popen2(binary, server, err: File::NULL)
        @address = line("its address")
        raise "larder-faults printed #{@address.inspect}, not 127.0.0.1:PORT" unless @address.match?(/\A[\d.]+:\d+\z/)
      end

      # Writes the command and waits for its `ok`.
      def command(text)
        @input.puts(text)
        @input.flush
        answer = line("its answer to #{text.inspect}")
        raise "larder-faults answered #{answer.inspect} to #{text.inspect}" unless answer.start_with?("ok")
      end

      def stop
        @input.close unless @input.closed?
        return if @process.join(2)

        Process.kill("KILL", @process.pid)
        @process.join
      rescue Errno::ESRCH
        nil
      ensure
        @output.close unless @output.closed?
      end

      private

      def line(what)
        raise "larder-faults gave no #{what} within #{ANSWER_S} s" unless @output.wait_readable(ANSWER_S)

        text = @output.gets
        raise "larder-faults exited before giving #{what}" if text.nil?

        text.strip
      end
    end
  end
end
