# frozen_string_literal: true

require "larder/signed_ext"

module Conformance
  # signed.json (spec/FORMAT.md §2): signing and verifying ext 80/101 payloads, and, for ext 101 (Marshal, which Ruby
  # interprets), what LarderStore reads from the entry on a memory store: the payload's object when it verifies, a
  # miss when it is refused. Case names are prefixed with their section.
  module Signed
    SECTIONS = %w[signed refused rotation].freeze

    module_function

    def cases(document)
      SECTIONS.flat_map do |section|
        document.fetch(section).map do |vector|
          ["#{section}/#{vector.fetch('name')}", ->(test) { send(section, test, vector) }]
        end
      end
    end

    def signed(test, vector)
      payload = [vector["payload_hex"]].pack("H*")
      signer = Larder::SignedExt.new(vector["secret"])
      test.assert_equal vector["signing_key_hex"], Larder::SignedExt.signing_key(vector["secret"]).unpack1("H*")
      test.assert_equal vector["data_hex"], signer.sign(vector["ext_type"], payload).unpack1("H*")
      test.assert_equal payload, signer.verify(vector["ext_type"], [vector["data_hex"]].pack("H*"))
      ext = Larder.decode([vector["entry_hex"]].pack("H*")).value
      test.assert_equal [vector["ext_type"], vector["data_hex"]], [ext.type, ext.payload.unpack1("H*")]
      return unless vector["ext_type"] == 101

      read = rails_read(vector["entry_hex"], signing_secret: vector["secret"])
      test.assert_equal Marshal.load(payload), read # rubocop:disable Security/MarshalLoad
    end

    def refused(test, vector)
      data = [vector["data_hex"]].pack("H*")
      secrets = vector["secrets"]
      unless secrets.empty?
        signer = Larder::SignedExt.new(secrets.first, fallbacks: secrets.drop(1))
        test.assert_raises(Larder::SignedExt::Refused) { signer.verify(vector["ext_type"], data) }
      end
      return unless vector["ext_type"] == 101 # Ruby interprets ext 101 only; ext 80 stays an opaque ext value

      options = secrets.empty? ? {} : { signing_secret: secrets.first, signing_secret_fallbacks: secrets.drop(1) }
      test.assert_nil rails_read(vector["entry_hex"], **options)
    end

    def rotation(test, vector)
      current, *older = vector["secrets"]
      signer = Larder::SignedExt.new(current, fallbacks: older)
      data = [vector["data_hex"]].pack("H*")
      test.assert_equal [vector["payload_hex"]].pack("H*"), signer.verify(vector["ext_type"], data)
      test.assert_raises(Larder::SignedExt::Refused) { Larder::SignedExt.new(current).verify(vector["ext_type"], data) }
      test.refute_equal data, signer.sign(vector["ext_type"], [vector["payload_hex"]].pack("H*")),
                        "writers sign with the current secret"
    end

    # What LarderStore reads when the entry is at one of its keys (a memory store; refusals are logged nowhere).
    def rails_read(entry_hex, **options)
      require "active_support/cache/larder_store"
      require "logger"
      memory = Larder::Stores::Memory.new
      store = ActiveSupport::Cache::LarderStore.new({ store: memory, namespace: "app" }.merge(options))
      store.logger = Logger.new(File::NULL)
      memory.set(Larder::Keys.safe_key(store.send(:normalize_key, "vector", {})), [entry_hex].pack("H*"))
      store.read("vector")
    end
  end
end
