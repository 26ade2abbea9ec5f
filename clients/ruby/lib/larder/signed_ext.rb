# frozen_string_literal: true

require "openssl"

module Larder
  # Signed ext values (spec/FORMAT.md §2, "Ext 80 and 101 are signed"). `Marshal.load` runs code the bytes name, and a
  # shared store has many writers, so Ruby interprets an ext 101 value only when its application signed it: the ext
  # data is `scheme (1) ‖ HMAC-SHA256 (32) ‖ payload`, the mac taken with a key derived from the application's secret
  # over "larder-ext" 0x00, the ext type and the payload. Readers may accept older secrets (rotation); writers sign
  # with the current one. Anything else is refused: the caller reads a miss.
  class SignedExt
    SCHEME = 1
    MAC_SIZE = 32
    KEY_MESSAGE = "larder.signed-ext.v1"
    MAC_PREFIX = "larder-ext\x00".b.freeze

    # Why an ext value was refused, as logged.
    REASONS = {
      "no_secret" => "no signing secret is configured, so Marshal is off",
      "marshal_free" => "the serializer does not use Marshal",
      "short" => "shorter than a scheme and a mac",
      "scheme" => "an unknown signing scheme",
      "mac" => "the mac does not match (tampered, another application's secret, or written unsigned)",
      "unreadable" => "its signed Marshal dump did not load"
    }.freeze

    @logged = {}
    @mutex = Mutex.new

    class << self
      # HMAC-SHA256(secret's UTF-8 bytes, "larder.signed-ext.v1").
      def signing_key(secret)
        OpenSSL::HMAC.digest("SHA256", secret.to_s.encode(Encoding::UTF_8).b, KEY_MESSAGE)
      end

      # True the first time `reason` is noted in this process (an implementation logs the first refusal per
      # process and reason, not every one).
      def first_refusal?(reason)
        @mutex.synchronize { @logged.key?(reason) ? false : (@logged[reason] = true) }
      end
    end

    # Raised by `verify` for data that is refused; `reason` is a key of REASONS.
    class Refused < StandardError
      attr_reader :reason

      def initialize(reason)
        @reason = reason
        super("signed ext refused: #{REASONS.fetch(reason)}")
      end
    end

    # `secret`: the application's secret (String); `fallbacks`: older secrets whose macs are still accepted.
    def initialize(secret, fallbacks: [])
      raise ArgumentError, "a signing secret is a non-empty String" unless secret.is_a?(String) && !secret.empty?

      @keys = [secret, *fallbacks].map { |s| SignedExt.signing_key(s) }.freeze
    end

    # The ext data for `payload` under ext type `ext_type`, signed with the current secret.
    def sign(ext_type, payload)
      payload = payload.b
      [SCHEME].pack("C") + mac(@keys.first, ext_type, payload) + payload
    end

    # The payload of signed ext data, or raises Refused.
    def verify(ext_type, data)
      data = data.b
      raise Refused, "short" if data.bytesize < 1 + MAC_SIZE
      raise Refused, "scheme" unless data.getbyte(0) == SCHEME

      stored = data.byteslice(1, MAC_SIZE)
      payload = data.byteslice(1 + MAC_SIZE, data.bytesize - 1 - MAC_SIZE)
      matches = @keys.any? { |key| OpenSSL.fixed_length_secure_compare(mac(key, ext_type, payload), stored) }
      raise Refused, "mac" unless matches

      payload
    end

    private

    def mac(key, ext_type, payload)
      OpenSSL::HMAC.digest("SHA256", key, MAC_PREFIX + [ext_type].pack("C") + payload)
    end
  end
end
