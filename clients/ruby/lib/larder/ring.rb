# frozen_string_literal: true

require "digest"

module Larder
  # memcached server selection: classic ketama (spec/STORES.md §4.2), as libmemcached and twemproxy compute it, so
  # every language sends a key to the same server. `spec/vectors/ring.json` checks it.
  class Ring
    POINTS_PER_SERVER = 160

    # `servers`: [host, port, weight] in the URL's order; `indexes`: the index of each in the original list (so a
    # ring rebuilt without an ejected server still answers with original indexes).
    def initialize(servers, indexes = (0...servers.size).to_a)
      total = servers.sum { |_, _, weight| weight }
      points = []
      servers.each_with_index do |(host, port, weight), position|
        count = ((weight.to_f / total * POINTS_PER_SERVER / 4 * servers.size) + 1e-10).floor
        count.times do |n|
          name = port == 11_211 ? "#{host}-#{n}" : "#{host}:#{port}-#{n}"
          Digest::MD5.digest(name).unpack("V4").each { |value| points << [value, indexes[position]] }
        end
      end
      @points = points.sort!
      @values = @points.map(&:first)
    end

    attr_reader :points

    # The server index for a stored key.
    def server(key)
      return nil if @points.empty?

      hash = self.class.hash(key)
      at = @values.bsearch_index { |value| value >= hash } || 0
      @points[at][1]
    end

    def self.hash(key)
      Digest::MD5.digest(key.b).unpack1("V")
    end
  end
end
