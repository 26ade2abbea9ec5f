# frozen_string_literal: true

require "socket"
require "io/wait"
require "tmpdir"
require "fileutils"
require "open3"

# Real servers for the store tests, started on free loopback ports the first time a test asks for one and stopped
# when the test process exits. A missing server binary fails the test, saying how to install it: never a skip.
module Servers
  MEMCACHED = %w[/usr/bin/memcached /usr/sbin/memcached].freeze
  REDIS = %w[/usr/bin/redis-server].freeze
  REDIS_CLI = %w[/usr/bin/redis-cli].freeze
  PG_DIRS = %w[/usr/lib/postgresql/15/bin /usr/lib/postgresql/16/bin /usr/lib/postgresql/17/bin].freeze

  @started = {}
  @pids = []
  @dirs = []
  @mutex = Mutex.new

  class << self
    def binary(candidates, package)
      found = candidates.find { |path| File.executable?(path) }
      return found if found

      raise "#{File.basename(candidates.first)} is not installed (Debian package #{package}): run `make services` " \
            "from the repository root"
    end

    def free_port
      server = TCPServer.new("127.0.0.1", 0)
      server.addr[1]
    ensure
      server&.close
    end

    def wait_port(port, what, pid = nil, seconds: 15)
      deadline = Time.now + seconds
      loop do
        TCPSocket.new("127.0.0.1", port).close
        return
      rescue SystemCallError
        raise "#{what} exited before listening on #{port}" if pid && Process.waitpid(pid, Process::WNOHANG)
        raise "#{what} did not listen on #{port} within #{seconds}s" if Time.now > deadline

        sleep 0.02
      end
    end

    def spawn(what, *command, port:)
      pid = Process.spawn(*command, out: File::NULL, err: File::NULL, pgroup: true)
      @pids << pid
      wait_port(port, what, pid)
      pid
    end

    # Until the server on `port` answers `request` with a line starting with `expected`: a port that accepts is not
    # yet a server that answers (its event loop may start later, and on a loaded machine the tests' first requests
    # timed out against a redis-server that was listening but not yet answering).
    def wait_answer(port, what, request, expected, seconds: 15)
      deadline = Time.now + seconds
      until answers?(port, request, expected)
        raise "#{what} on #{port} did not answer within #{seconds}s" if Time.now > deadline

        sleep 0.02
      end
    end

    def answers?(port, request, expected)
      socket = TCPSocket.new("127.0.0.1", port)
      socket.write(request)
      socket.wait_readable(1) && socket.gets.to_s.start_with?(expected)
    rescue SystemCallError, IOError
      false
    ensure
      socket&.close
    end

    # A memcached on a new port each call: "127.0.0.1:port" and its pid.
    def memcached(item_size: nil)
      port = free_port
      command = [binary(MEMCACHED, "memcached"), "-l", "127.0.0.1", "-p", port.to_s, "-U", "0", "-m", "64", "-t", "2",
                 "-u", "root"]
      command += ["-I", item_size] if item_size
      pid = spawn("memcached", *command, port: port)
      wait_answer(port, "memcached", "version\r\n", "VERSION")
      ["127.0.0.1:#{port}", pid]
    end

    def shared_memcached
      @mutex.synchronize { @started[:memcached] ||= memcached.first }
    end

    def redis
      @mutex.synchronize { @started[:redis] ||= new_redis }
    end

    # A redis-server on a new port each call (one a test may flush): "127.0.0.1:port".
    def new_redis
      port = free_port
      spawn("redis-server", binary(REDIS, "redis-server"), "--bind", "127.0.0.1", "--port", port.to_s, "--save", "",
            "--appendonly", "no", "--protected-mode", "no", port: port)
      wait_answer(port, "redis-server", "PING\r\n", "+PONG")
      "127.0.0.1:#{port}"
    end

    # The variables of spec/vectors/README.md (hostile_*.json, outage.json) for the conformance runner, when they are
    # not set already: a memcached and a redis-server of their own (the runner flushes them), larder-hostile and
    # larder-faults.
    def conformance_environment
      @mutex.synchronize do
        @started[:conformance] ||= begin
          ENV["LARDER_CONFORMANCE_MEMCACHED"] ||= memcached.first
          ENV["LARDER_CONFORMANCE_REDIS"] ||= new_redis
          ENV["LARDER_HOSTILE"] ||= File.join(TestPaths::REPO, "target", "debug", "larder-hostile")
          ENV["LARDER_FAULTS"] ||= File.join(TestPaths::REPO, "target", "debug", "larder-faults")
          true
        end
      end
      ENV.slice("LARDER_CONFORMANCE_MEMCACHED", "LARDER_CONFORMANCE_REDIS", "LARDER_HOSTILE", "LARDER_FAULTS")
    end

    # A three-master Redis Cluster: its seed addresses.
    def redis_cluster
      @mutex.synchronize { @started[:redis_cluster] ||= start_cluster }
    end

    def postgres
      @mutex.synchronize { @started[:postgres] ||= start_postgres }
    end

    def stop_all
      @pids.each { |pid| signal(pid) }
      # Signal every server first, then wait for them all: they stop in parallel.
      @pids.each do |pid| # rubocop:disable Style/CombinableLoops
        Process.waitpid(pid)
      rescue Errno::ECHILD
        nil
      end
      @postgres_stop&.call
      @dirs.each { |dir| FileUtils.rm_rf(dir) }
    end

    private

    def signal(pid)
      Process.kill("TERM", -pid)
    rescue Errno::ESRCH, Errno::EPERM
      nil
    end

    # A node-timeout of 30 s: the test cluster never needs a failover, and a loaded machine must not get a node
    # marked failed.
    def start_cluster
      server = binary(REDIS, "redis-server")
      cli = binary(REDIS_CLI, "redis-tools")
      dir = Dir.mktmpdir("larder-rb-cluster-")
      @dirs << dir
      ports = Array.new(3) { free_port }
      ports.each do |port|
        spawn("redis-server", server, "--bind", "127.0.0.1", "--port", port.to_s, "--save", "", "--appendonly", "no",
              "--protected-mode", "no", "--cluster-enabled", "yes", "--cluster-config-file",
              File.join(dir, "nodes-#{port}.conf"), "--cluster-node-timeout", "30000", port: port)
      end
      out, status = Open3.capture2e(cli, "--cluster", "create", *ports.map { |p| "127.0.0.1:#{p}" },
                                    "--cluster-replicas", "0", "--cluster-yes")
      raise "redis-cli --cluster create failed: #{out}" unless status.success?

      ports.each { |port| wait_cluster(cli, port) }
      ports.map { |p| "127.0.0.1:#{p}" }
    end

    # Until this node says the cluster is ok: every node, since a node that has not yet learnt every slot's owner
    # answers CLUSTERDOWN while the first one already says ok.
    def wait_cluster(cli, port)
      deadline = Time.now + 20
      until Open3.capture2(cli, "-p", port.to_s, "cluster", "info").first.include?("cluster_state:ok")
        raise "the Redis Cluster did not become ready" if Time.now > deadline

        sleep 0.05
      end
    end

    # PostgreSQL listens before it accepts sessions (a client then reads "the database system is starting up"):
    # waits until pg_isready says it accepts them, as larder-testkit does.
    def wait_for_sessions(pg_isready, port, seconds: 20)
      deadline = Time.now + seconds
      until system(pg_isready, "-q", "-h", "127.0.0.1", "-p", port.to_s, "-U", "larder", "-d", "postgres")
        raise "postgres on port #{port} did not accept sessions within #{seconds}s" if Time.now > deadline

        sleep 0.05
      end
    end

    def start_postgres
      dir = Dir.mktmpdir("larder-rb-pg-")
      @dirs << dir
      data = File.join(dir, "data")
      FileUtils.mkdir_p(data)
      root = Process.uid.zero?
      system("chown", "-R", "postgres:postgres", dir, exception: true) if root
      bin = PG_DIRS.find { |d| File.executable?(File.join(d, "initdb")) }
      unless bin
        raise "PostgreSQL is not installed (Debian package postgresql): run `make services` from the repository root"
      end

      as_pg = root ? ["runuser", "-u", "postgres", "--"] : []
      out, status = Open3.capture2e(*as_pg, File.join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "larder",
                                    "--no-sync", "-E", "UTF8", "--locale=C")
      raise "initdb failed: #{out}" unless status.success?

      port = free_port
      spawn("postgres", *as_pg, File.join(bin, "postgres"), "-D", data, "-p", port.to_s, "-k", data, "-c",
            "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c",
            "full_page_writes=off",
            port: port)
      wait_for_sessions(File.join(bin, "pg_isready"), port)
      @postgres_stop = lambda do
        pid = File.read(File.join(data, "postmaster.pid")).lines.first.to_i
        Process.kill("INT", pid)
        50.times { File.exist?("/proc/#{pid}") ? sleep(0.1) : break }
      rescue StandardError
        nil
      end
      "postgres://larder@127.0.0.1:#{port}/postgres"
    end
  end
end

Minitest.after_run { Servers.stop_all }
