# frozen_string_literal: true

module Larder
  # The error kinds of spec/FORMAT.md §7, in the spec's order.
  ERROR_KINDS = %w[truncated bad_magic unsupported_version unknown_codec bad_header too_large corrupt_payload
                   bad_value].freeze

  # Every way an entry can be invalid (spec/FORMAT.md §7) surfaces as InvalidEntry, whose `kind` is the error-kind
  # name shared by every larder implementation, so a caller (or a test comparing languages) can tell why without
  # parsing messages. Decoding never lets any other exception escape, whatever the input bytes.
  class InvalidEntry < StandardError
    attr_reader :kind, :detail

    def initialize(kind, detail)
      raise ArgumentError, "unknown error kind #{kind.inspect}" unless ERROR_KINDS.include?(kind)

      @kind = kind
      @detail = detail
      super("#{kind}: #{detail}")
    end
  end

  # A system library (liblz4, libzstd, libsnappy, libbrotli) that a compressor needs could not be loaded.
  class MissingLibrary < StandardError; end

  # A store failed: it names the backend and, for remote stores, the server (spec/STORES.md §2).
  class StoreError < StandardError
    attr_reader :backend, :server

    def initialize(backend, message, server: nil)
      @backend = backend
      @server = server
      super(server ? "#{backend} #{server}: #{message}" : "#{backend}: #{message}")
    end
  end

  # A key or purge prefix a store does not take (spec/STORES.md §2 Keys): empty (keys only), longer than 250
  # bytes, holding a byte 0x00-0x20 or 0x7F, or (Ruby's Strings can hold any bytes; other languages' keys are text)
  # not UTF-8. Raised before anything is sent, so a caller's byte never becomes protocol.
  class InvalidKey < StoreError
    attr_reader :key, :reason

    def initialize(backend, key, reason)
      @key = key
      @reason = reason
      shown = key.b.byteslice(0, 80).inspect
      super(backend, "invalid_key: #{shown}#{key.bytesize > 80 ? '…' : ''}: #{reason}")
    end

    def kind
      "invalid_key"
    end
  end

  # A value that is not a counter was given to incr (spec/STORES.md §3).
  class NotACounter < StoreError; end

  # A value the store cannot hold (spec/STORES.md §2 Sizes).
  class TooLarge < StoreError; end

  # An operation the store does not offer with its options (memcached purge by prefix with prefix_purge=false).
  class Unsupported < StoreError; end

  # A store URL that does not parse, or names an option the store does not know (spec/STORES.md §1).
  class UrlError < ArgumentError; end

  # A value needs Marshal (spec/FORMAT.md §2, ext 101), and Marshal is off: no signing secret is configured, or the
  # serializer is one that never uses Marshal. The message says how to turn it on.
  class MarshalDisabled < ArgumentError; end

  # A setting the caller must give is missing (Larder.store).
  class ConfigurationError < StandardError; end
end
