# frozen_string_literal: true

# The 001 comparison of serializers × compressors in Ruby, on the post's kind of data: a list of records with
# associations (50 posts, each with its author, 5 comments with their authors, and tags), as Hashes with String keys.
# Serializers: Marshal and MessagePack (the msgpack gem); compressors: none, gzip (Zlib, level 6), LZ4, zstd (3),
# Snappy, Brotli (4), the last four through larder's Fiddle bindings (lib/larder/compressors.rb), in larder's wire
# forms (spec/FORMAT.md §3). Prints bytes, and dump (serialize + compress) and load (decompress + deserialize) per
# second over SECONDS (default 0.5) per cell, one thread.
#
#   ruby clients/ruby/bench/codecs.rb
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "etc"
require "msgpack"
require "larder"

SECONDS = Float(ENV.fetch("SECONDS", "0.5"))

def person(random, id)
  { "id" => id, "name" => "User #{id}", "email" => "user#{id}@example.com", "admin" => random.rand < 0.1,
    "created_at" => "2026-0#{1 + random.rand(9)}-1#{random.rand(9)}T10:00:00Z" }
end

def records
  random = Random.new(1)
  Array.new(50) do |i|
    { "id" => i + 1, "title" => "Post number #{i + 1} about caching", "body" => "Lorem ipsum dolor sit amet. " * 8,
      "published" => true, "views" => random.rand(100_000), "score" => random.rand.round(4),
      "author" => person(random, random.rand(1000)), "tags" => %w[ruby rails cache larder].sample(2, random: random),
      "comments" => Array.new(5) do |c|
        { "id" => (i * 10) + c, "body" => "Comment #{c} on post #{i + 1}: thanks!", "author" => person(random, c) }
      end }
  end
end

SERIALIZERS = {
  "Marshal" => [->(v) { Marshal.dump(v) }, ->(b) { Marshal.load(b) }], # rubocop:disable Security/MarshalLoad
  "MessagePack" => [->(v) { MessagePack.pack(v) }, ->(b) { MessagePack.unpack(b) }]
}.freeze
COMPRESSORS = %w[none gzip lz4 zstd snappy brotli].freeze

def rate
  count = 0
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + SECONDS
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    yield
    count += 1
  end
  (count / SECONDS).round
end

data = records
puts "ruby #{RUBY_VERSION}, msgpack #{MessagePack::VERSION}, #{data.size} records with associations, " \
     "#{SECONDS}s per cell, one thread, #{Etc.nprocessors} cores"
puts
puts "| serializer | compressor | bytes | dump/s | load/s |"
puts "|---|---|---|---|---|"
SERIALIZERS.each do |serializer, (dump, load)|
  COMPRESSORS.each do |compressor|
    pack = ->(v) { compressor == "none" ? dump.call(v) : Larder::Compressors.compress(compressor, dump.call(v)) }
    unpack = ->(b) { load.call(compressor == "none" ? b : Larder::Compressors.decompress(compressor, b)) }
    bytes = pack.call(data)
    raise "#{serializer}/#{compressor} does not round-trip" unless unpack.call(bytes) == data

    puts "| #{serializer} | #{compressor} | #{bytes.bytesize} | #{rate { pack.call(data) }} | " \
         "#{rate { unpack.call(bytes) }} |"
  end
end
