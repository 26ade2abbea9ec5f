# frozen_string_literal: true

require "net/http"
require "json"

# The 003 set-up for tests and benchmarks: a memcached, the example Rails app (examples/page_app) on WEBrick writing
# its pages there through Larder::Rack::PageCache, and `larder serve --store memcached://…` in front of it.
class PageFront
  APP = File.expand_path("../../examples/page_app/app.rb", __dir__)

  attr_reader :memcached, :store_url, :rails_port, :front_port

  def initialize(page_cache: true, front_args: [])
    @memcached, = Servers.memcached
    @store_url = "memcached://#{@memcached}"
    @rails_port = Servers.free_port
    @front_port = Servers.free_port
    env = { "LARDER_STORE" => @store_url, "LARDER_PAGE_CACHE" => page_cache ? "on" : "off" }
    Servers.wait_port(@rails_port, "the Rails app", spawn_app(env), seconds: 60)
    Servers.spawn("larder serve", TestPaths.rust_bin, "serve", "--upstream", "http://127.0.0.1:#{@rails_port}",
                  "--listen", "127.0.0.1:#{@front_port}", "--no-admin", "--store", @store_url, *front_args,
                  port: @front_port)
  end

  def front_authority
    "127.0.0.1:#{@front_port}"
  end

  # A GET through the front (or straight to Rails with `direct: true`).
  def get(path, direct: false, headers: {})
    exchange(path, direct: direct, headers: headers).first
  end

  # A GET as #get, and the header lines Net::HTTP actually sent with it ([lowercase name, value] pairs: the ones
  # given and the ones it adds itself, such as Accept-Encoding, User-Agent and Host).
  def exchange(path, direct: false, headers: {})
    port = direct ? @rails_port : @front_port
    request = Net::HTTP::Get.new(path, headers)
    response = Net::HTTP.start("127.0.0.1", port) { |http| http.request(request) }
    [response, request.to_hash.flat_map { |name, values| values.map { |value| [name, value] } }]
  end

  # Requests that reached Ruby so far.
  def app_requests
    JSON.parse(get("/stats", direct: true).body).fetch("requests")
  end

  private

  def spawn_app(env)
    pid = Process.spawn(env, RbConfig.ruby, APP, @rails_port.to_s, out: File::NULL, err: log_file, pgroup: true)
    Servers.instance_variable_get(:@pids) << pid
    pid
  end

  def log_file
    File.join(Dir.tmpdir, "larder-page-app-#{Process.pid}.log")
  end
end
