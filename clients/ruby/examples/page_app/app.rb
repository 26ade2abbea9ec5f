# frozen_string_literal: true

# A small Rails 6.1 app (railties + actionpack, no database) whose pages go into larder's shared store through
# Larder::Rack::PageCache, so that `larder serve --store <the same URL>` answers them without reaching Ruby. Used by
# the end-to-end test (test/page_cache_rails_test.rb) and bench/rails-page-cache.sh.
#
#   LARDER_STORE=memcached://127.0.0.1:11211 ruby examples/page_app/app.rb 3000
#
# Every request that reaches Ruby is counted; GET /stats answers the count (never cached).
require "logger"
require "rails"
require "action_controller/railtie"
$LOAD_PATH.unshift File.expand_path("../../lib", __dir__)
require "larder"

# The app's requests, counted before anything else runs.
class RequestCounter
  @count = 0
  @mutex = Mutex.new
  class << self
    def increment
      @mutex.synchronize { @count += 1 }
    end

    def count
      @mutex.synchronize { @count }
    end
  end

  def initialize(app)
    @app = app
  end

  def call(env)
    RequestCounter.increment unless env["PATH_INFO"] == "/stats"
    @app.call(env)
  end
end

# The application.
class PageApp < Rails::Application
  config.root = __dir__
  config.eager_load = false
  config.cache_classes = true
  config.consider_all_requests_local = false
  config.logger = Logger.new(nil)
  config.log_level = :fatal
  config.hosts.clear
  config.secret_key_base = "larder-page-app-#{'0' * 48}"
  config.larder[:store] = ENV.fetch("LARDER_STORE")
  config.larder.page_cache = { namespace: ENV.fetch("LARDER_NAMESPACE", "") } unless ENV["LARDER_PAGE_CACHE"] == "off"
  config.middleware.insert(0, RequestCounter)

  routes.append do
    get "/products/:id" => "pages#product"         # Cache-Control: public, max-age=60 (the front would store it too)
    get "/opt/:id" => "pages#opt_in"               # Rails' private default; opted in for the page cache
    get "/greeting" => "pages#greeting"            # opted in, Vary: Accept-Language
    get "/cookie" => "pages#cookie"                # opted in, but sets a cookie: never stored
    get "/stats" => "pages#stats"
  end
end

PageApp.initialize!

# The pages (defined after initialize!, which includes Larder::PageCaching into controllers).
class PagesController < ActionController::Base
  larder_page_cache expires_in: 60, only: %i[opt_in greeting cookie], tags: -> { ["page:#{params[:id] || 'greeting'}"] }

  def product
    expires_in 60, public: true
    larder_tags "product:#{params[:id]}", "products"
    render_page
  end

  def opt_in
    render_page
  end

  def greeting
    response.headers["Vary"] = "Accept-Language"
    render plain: request.headers["Accept-Language"].to_s.start_with?("fr") ? "bonjour\n" : "hello\n"
  end

  def cookie
    cookies[:seen] = "yes"
    render plain: "with a cookie\n"
  end

  def stats
    response.headers["Cache-Control"] = "no-store"
    render json: { requests: RequestCounter.count, pid: Process.pid }
  end

  private

  def render_page
    @id = params[:id]
    @products = Array.new(40) { |i| { id: (@id.to_i * 100) + i, name: "Product #{i}", price: 100 + (i * 7) } }
    @rendered_at = Time.now.utc.iso8601(6)
    render :show
  end
end

if $PROGRAM_NAME == __FILE__
  require "rack/handler/webrick"
  port = Integer(ARGV.fetch(0, "3000"))
  Rack::Handler::WEBrick.run(PageApp, Host: "127.0.0.1", Port: port, Logger: WEBrick::Log.new(File::NULL),
                                      AccessLog: [])
end
