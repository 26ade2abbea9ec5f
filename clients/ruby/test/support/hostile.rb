# frozen_string_literal: true

require "json"
require "rbconfig"

# `larder-hostile` (crates/testkit): a memcached or Redis that answers handshakes properly and every data command
# with one bad reply (drip, huge, nested, endless-line, garbage, silent), for spec/STORES.md §2 "Replies are hostile
# too". The Makefile passes its path in LARDER_HOSTILE; the default is the debug build beside the Rust binary.
module Hostile
  BIN = ENV.fetch("LARDER_HOSTILE", File.join(TestPaths::REPO, "target", "debug", "larder-hostile"))

  module_function

  # Runs a hostile server for the block, which gets its "127.0.0.1:PORT"; it stops when its stdin closes.
  def serve(protocol, behaviour, *args)
    unless File.executable?(BIN)
      raise "#{BIN} is missing: build it with `cargo build -p larder-testkit --bins` from the repository root"
    end

    io = IO.popen([BIN, protocol, behaviour, *args], "r+", err: File::NULL)
    address = io.gets.to_s.strip
    raise "larder-hostile #{protocol} #{behaviour} printed no address" unless address.match?(/\A127\.0\.0\.1:\d+\z/)

    yield address
  ensure
    if io
      io.close_write
      io.close
    end
  end

  # Runs the block in a child process and returns what it measured: the block's result (JSON-able), the peak
  # resident memory growth in bytes (VmHWM after, less VmRSS before: what the call itself took) and the seconds it
  # took. A child, so that memory the parent took before cannot hide the call's, and the call's cannot stay.
  def measure(&block)
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      File.write("/proc/self/clear_refs", "5") # resets VmHWM to the resident size now
      before = status_kb("VmRSS")
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      result = begin
        block.call
      rescue StandardError, SystemStackError, NoMemoryError => e
        { "raised" => e.class.name, "message" => e.message[0, 300] }
      end
      elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      writer.write(JSON.generate({ "result" => result, "seconds" => elapsed,
                                   "growth" => (status_kb("VmHWM") - before) * 1024 }))
    ensure
      # Never the parent's at_exit handlers (minitest's run, stopping the servers) in the child.
      writer.close
      exit!(0)
    end
    writer.close
    output = reader.read
    Process.wait(pid)
    JSON.parse(output)
  ensure
    reader&.close
  end

  def status_kb(field)
    File.read("/proc/self/status")[/^#{field}:\s+(\d+) kB/, 1].to_i
  end
end
