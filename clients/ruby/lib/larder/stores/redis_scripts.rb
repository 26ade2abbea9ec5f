# frozen_string_literal: true

require "digest"

module Larder
  module Stores
    # The Lua scripts the Redis store runs, as spec/redis/ holds them once for every language (spec/STORES.md §5
    # "Scripts"): their bytes as they are, and the SHA-1 `EVALSHA` names them by, so every language runs the same
    # scripts under the same names.
    #
    # Where they come from: a built gem carries a copy in lib/larder/stores/redis_scripts/ (`rake build` copies
    # spec/redis there just before `gem build`, and removes it after, so a checkout never holds a stale copy); a
    # checkout (tests, `gem "larder", path: "clients/ruby"`) reads the repository's spec/redis. The copy wins when
    # present: an installed gem never looks outside itself.
    module RedisScripts
      NAMES = %w[delete_if incr tag].freeze
      # In a built gem.
      PACKAGED = ::File.expand_path("redis_scripts", __dir__)
      # In a checkout: clients/ruby/lib/larder/stores → the repository's spec/redis.
      CHECKOUT = ::File.expand_path("../../../../../spec/redis", __dir__)

      # One script: its name, its bytes, and their SHA-1 (lowercase hex, as SCRIPT LOAD answers).
      Script = Struct.new(:name, :source, :sha1)

      @mutex = Mutex.new
      @all = nil

      module_function

      # The script `name` (one of NAMES).
      def fetch(name)
        all.fetch(name.to_s) { raise ArgumentError, "no Redis script #{name.inspect} (#{NAMES.join(', ')})" }
      end

      # Every script, read once per process.
      def all
        @mutex.synchronize { @all ||= read(directory) }
      end

      # The first of PACKAGED and CHECKOUT that holds every script.
      def directory
        [PACKAGED, CHECKOUT].find { |dir| NAMES.all? { |name| ::File.file?(::File.join(dir, "#{name}.lua")) } } or
          raise ConfigurationError, "the Redis scripts (#{NAMES.map { |n| "#{n}.lua" }.join(', ')}) are in neither " \
                                    "#{PACKAGED} (a built gem) nor #{CHECKOUT} (a checkout of larder): " \
                                    "build the gem with `rake build`, which packages spec/redis"
      end

      def read(dir)
        NAMES.to_h do |name|
          source = ::File.binread(::File.join(dir, "#{name}.lua")).freeze
          [name, Script.new(name, source, Digest::SHA1.hexdigest(source)).freeze]
        end.freeze
      end
    end
  end
end
