# frozen_string_literal: true

require_relative "test_helper"
require "active_support/cache/larder_store"
require "logger"
require "stringio"
require "open3"

# Marshal values are signed (spec/FORMAT.md §2, "Ext 80 and 101 are signed"; spec/vectors/signed.json's cases run in
# vectors_test.rb). The attack of issue 15 against LarderStore: a Marshal payload that runs code when loaded, put
# under a Rails key by another writer of the store, unsigned or signed under another secret, reads as a miss and runs
# nothing.
class SignedMarshalTest < Minitest::Test
  SECRET = "0f" * 64

  # Loading this runs code: Marshal.load calls `_load`, which here only raises a flag.
  class Gadget
    class << self
      attr_accessor :loaded

      def _load(_data)
        self.loaded = true
        new
      end
    end

    def _dump(_level)
      "boom"
    end
  end

  def setup
    Gadget.loaded = false
    @log = StringIO.new
  end

  def rails_store(**options)
    ActiveSupport::Cache::LarderStore.new({ store: memory, namespace: "app" }.merge(options)).tap do |store|
      store.logger = Logger.new(@log)
    end
  end

  def memory
    @memory ||= Larder::Stores::Memory.new
  end

  def rails_key(store, name)
    Larder::Keys.safe_key(store.send(:normalize_key, name, {}))
  end

  def ext_entry(data)
    Larder.encode(MessagePack::ExtensionValue.new(101, data).then { |v| MessagePack.pack(v) }, serializer: "raw")
          .tap { |bytes| bytes.setbyte(4, 1) } # msgpack serializer around an already packed payload
  end

  def test_values_round_trip_signed_with_the_secret
    store = rails_store(signing_secret: SECRET)
    value = { a: :b, at: Time.at(1_700_000_000) }
    assert store.write("user/1", value)
    assert_equal value, store.read("user/1")
    ext = Larder.decode(memory.get(rails_key(store, "user/1"))).value
    assert_equal 101, ext.type
    assert_equal Marshal.dump(value), Larder::SignedExt.new(SECRET).verify(101, ext.payload)
  end

  def test_rotation_reads_values_signed_with_an_older_secret
    rails_store(signing_secret: "old-secret").write("k", :v)
    assert_equal :v, rails_store(signing_secret: "new-secret", signing_secret_fallbacks: ["old-secret"]).read("k")
    assert_nil rails_store(signing_secret: "new-secret").read("k")
  end

  def test_without_a_secret_marshal_is_off
    store = rails_store
    error = assert_raises(Larder::MarshalDisabled) { store.write("k", { a: :b }) }
    assert_includes error.message, "signing_secret:"
    assert store.write("plain", { "a" => [1, "b"] }), "plain values need no Marshal"
    assert_equal({ "a" => [1, "b"] }, store.read("plain"))
    rails_store(signing_secret: SECRET).write("signed", :v)
    assert_nil store.read("signed"), "a signed value is a miss without the secret"
  end

  def test_the_attack_unsigned_or_wrongly_signed_marshal_runs_nothing
    gadget = Marshal.dump(Gadget.new)
    store = rails_store(signing_secret: SECRET)
    forged = {
      "unsigned" => ext_entry(gadget),
      "other_secret" => ext_entry(Larder::SignedExt.new("another app's secret").sign(101, gadget)),
      "signed_as_pickle" => ext_entry(Larder::SignedExt.new(SECRET).sign(80, gadget)),
      "scheme_two" => ext_entry("\x02".b + Larder::SignedExt.new(SECRET).sign(101, gadget).byteslice(1..))
    }
    forged.each { |name, data| memory.set(rails_key(store, name), data) }
    assert_equal({}, store.read_multi(*forged.keys))
    forged.each_key do |name|
      assert_nil store.read(name), name
      assert_equal "computed", store.fetch(name) { "computed" }, name # rubocop:disable Style/RedundantFetchBlock
    end
    refute Gadget.loaded, "Marshal.load never ran on the forged bytes"
  end

  def test_message_pack_and_msgpack_never_use_marshal
    signed = ext_entry(Larder::SignedExt.new(SECRET).sign(101, Marshal.dump(Gadget.new)))
    %i[message_pack msgpack].each do |serializer|
      store = rails_store(serializer: serializer, signing_secret: SECRET)
      memory.set(rails_key(store, "signed"), signed)
      assert_nil store.read("signed"), "#{serializer}: even a correctly signed Marshal value is a miss"
      assert_raises(Larder::MarshalDisabled, serializer.to_s) { store.write("k", { a: :b }) }
      assert store.write("k", { "a" => 1 })
      assert_equal({ "a" => 1 }, store.read("k"))
    end
    refute Gadget.loaded
  end

  # In a new process, where no refusal was logged yet: three refusals for one reason log one line, another reason one
  # more.
  def test_a_refusal_is_logged_once_per_process_and_reason
    script = <<~RUBY
      require "active_support/cache/larder_store"
      require "logger"
      memory = Larder::Stores::Memory.new
      store = ActiveSupport::Cache::LarderStore.new(store: memory, signing_secret: "s3cret")
      store.logger = Logger.new($stdout)
      signed = ->(secret) { Larder::SignedExt.new(secret).sign(101, Marshal.dump(1)) }
      entry = ->(data) { Larder.encode(MessagePack.pack(MessagePack::ExtensionValue.new(101, data)), serializer: "raw").tap { |e| e.setbyte(4, 1) } }
      memory.set("bad", entry.call(signed.call("other")))
      memory.set("short", entry.call("x"))
      3.times { store.read("bad") }
      2.times { store.read("short") }
    RUBY
    out, status = Open3.capture2(RbConfig.ruby, "-I", File.expand_path("../lib", __dir__), "-e", script)
    assert status.success?
    assert_equal 1, out.scan("the mac does not match").size, out
    assert_equal 1, out.scan("shorter than a scheme and a mac").size, out
  end

  def test_response_entries_and_corrupt_marshal_are_misses
    store = rails_store(signing_secret: SECRET)
    page = Larder.encode_response(Larder::HttpResponse.new(200, [["content-type", "text/html"]], "<p>hi</p>".b))
    memory.set(rails_key(store, "page"), page)
    assert_nil store.read("page"), "a kind-1 entry at a Rails key is not a value"
    memory.set(rails_key(store, "corrupt"),
               ext_entry(Larder::SignedExt.new(SECRET).sign(101, "\x04\x08o:\x0FNoSuchClass".b)))
    assert_nil store.read("corrupt")
    assert_equal({}, store.read_multi("page", "corrupt"))
    cache = Larder::Cache.new(memory)
    memory.set("page", page)
    assert_nil cache.read("page")
    assert_equal({}, cache.read_multi("page"))
  end

  def test_coder_marshal_is_refused
    error = assert_raises(ArgumentError) { rails_store(coder: Marshal) }
    assert_includes error.message, ":marshal_7_1"
  end
end
