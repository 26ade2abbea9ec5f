# frozen_string_literal: true

require "digest"

module Larder
  # Keys every language derives identically (spec/FORMAT.md §5), so an entry written by one is found by another.
  #
  # `safe_key` fits memcached's rules (at most 250 bytes, no spaces or control characters) by hashing what does not
  # fit, keeping a readable prefix; `namespaced_key` prefixes a namespace; `http_key` and `url_key` turn a request
  # into a key with the query sorted and tracking parameters dropped; `selecting_values`, `variant_key`,
  # `alternate_key` and `url_keys` are the helpers of §5.5 every language offers under these names, over a
  # request's header lines as ordered [name, value] pairs. Lengths and comparisons are over UTF-8 bytes, and case
  # changes are ASCII-only: no Unicode case folding, no percent-decoding.
  module Keys
    # memcached's key length limit.
    MAX_KEY_LEN = 250
    # Longest readable prefix kept in a hashed key.
    HASHED_PREFIX_LEN = 180
    # Query parameters dropped from HTTP keys unless told otherwise.
    DEFAULT_DROP = %w[utm_* gclid fbclid msclkid].freeze
    UNSAFE = /[\x00-\x20\x7F]/n
    # Encodings whose strings are keys as their bytes are (safe_key); any other is transcoded to UTF-8 first.
    PLAIN_ENCODINGS = [Encoding::UTF_8, Encoding::BINARY, Encoding::US_ASCII].freeze
    # The same bytes, for matching UTF-8 text (a /n regexp warns on it).
    UNSAFE_TEXT = /[\x00-\x20\x7F]/
    DEFAULT_PORTS = { "http" => ":80", "https" => ":443" }.freeze
    # The codings an alternate may be in (spec/FORMAT.md §5.5), in the order url_keys lists their keys.
    CODINGS = %w[identity gzip br zstd].freeze

    module_function

    # `key` unchanged if memcached accepts it, else its readable prefix, `#`, and the SHA-256 of the whole key.
    # Bytes that are not UTF-8 are hashed too (a Ruby String can hold them; every other language's keys are text, so
    # this changes no key they can make): stores take only UTF-8 keys (see key_problem).
    def safe_key(key)
      # The common case (a UTF-8 key memcached takes), checked and answered without copying it: every read and
      # write runs this. (A copy, frozen, cost 1,700 instructions of 4,200 per call on a read; a Hash that keeps the
      # key copies an unfrozen one itself, as `-key`, for 800.)
      if key.is_a?(String) && key.encoding == Encoding::UTF_8 && key.bytesize <= MAX_KEY_LEN && key.valid_encoding? &&
         !key.match?(UNSAFE_TEXT)
        return key
      end

      text = key_text(key.to_s)
      return hashed(key.to_s.b) if text.nil?

      raw = text.b
      if raw.bytesize <= MAX_KEY_LEN && !raw.match?(UNSAFE)
        text = text.dup.force_encoding(Encoding::UTF_8)
        return text if text.valid_encoding?
      end

      hashed(raw)
    end

    # The readable prefix of `raw` (bytes), `#`, and its SHA-256.
    def hashed(raw)
      prefix = raw.byteslice(0, HASHED_PREFIX_LEN)[/\A[\x21-\x7E]*/n]
      "#{prefix}##{Digest::SHA256.hexdigest(raw)}".force_encoding(Encoding::UTF_8)
    end

    # What safe_key derives a key from: a UTF-8, binary or US-ASCII string as it is (its bytes: those that are not
    # UTF-8 are then hashed), a string in another encoding as its UTF-8, so that a Latin-1 or UTF-16 key gives the
    # key its text gives in every language; nil for a string not valid in its encoding (a lone UTF-16 surrogate),
    # whose bytes are then hashed, never read as UTF-8.
    def key_text(key)
      return key if PLAIN_ENCODINGS.include?(key.encoding)

      key.valid_encoding? ? key.encode(Encoding::UTF_8) : nil
    rescue EncodingError
      nil
    end

    # Why a store refuses `key` (spec/STORES.md §2 Keys), or nil for a safe key it takes.
    def key_problem(key)
      return "empty" if key.empty?

      prefix_problem(key)
    end

    # Why a store refuses a purge prefix (the rule of keys, but the empty prefix is allowed), or nil.
    def prefix_problem(prefix)
      if prefix.encoding == Encoding::UTF_8 && prefix.valid_encoding? # the common case, without a copy
        return "longer than #{MAX_KEY_LEN} bytes" if prefix.bytesize > MAX_KEY_LEN
        return "holds a control byte or a space (0x00-0x20, 0x7F)" if prefix.match?(UNSAFE_TEXT)

        return nil
      end

      raw = prefix.b
      return "longer than #{MAX_KEY_LEN} bytes" if raw.bytesize > MAX_KEY_LEN
      return "holds a control byte or a space (0x00-0x20, 0x7F)" if raw.match?(UNSAFE)
      return "not UTF-8" unless raw.ascii_only? || prefix.dup.force_encoding(Encoding::UTF_8).valid_encoding?

      nil
    end

    # `namespace:key` (just `key` when the namespace is empty or nil), made safe. Both are joined as their UTF-8
    # (key_text), so a key in Latin-1 or UTF-16 gives the key its text gives in every other language.
    def namespaced_key(namespace, key)
      return safe_key(key) if namespace.nil? || namespace.empty?

      namespace = namespace.to_s
      key = key.to_s
      # The common case, interpolated.
      if namespace.encoding == Encoding::UTF_8 && key.encoding == Encoding::UTF_8 && namespace.valid_encoding? &&
         key.valid_encoding?
        return safe_key("#{namespace}:#{key}")
      end

      namespace_utf8 = key_text(namespace)
      key_utf8 = key_text(key)
      return hashed("#{namespace.b}:#{key.b}".b) if namespace_utf8.nil? || key_utf8.nil?

      safe_key("#{namespace_utf8.b}:#{key_utf8.b}".b)
    end

    # The key of a request, from its parts as a server sees them (spec/FORMAT.md §5.3). `drop` lists query parameter
    # names to leave out; a pattern ending in `*` matches names starting with the rest.
    def http_key(method, scheme, authority, path_and_query, namespace: "", drop: DEFAULT_DROP)
      raise TypeError, "drop must be an Array of patterns, not a single String" if drop.is_a?(String)

      scheme = ascii_lower(scheme)
      base = +"#{ascii_upper(method)}:#{scheme}://#{normalize_authority(scheme, authority)}"
      without_fragment = path_and_query.b.split("#", 2).first || "".b
      path, query = without_fragment.split("?", 2)
      base << (path.nil? || path.empty? ? "/" : path.force_encoding(Encoding::UTF_8))
      parts = (query || "").split("&").reject { |part| part.empty? || dropped?(param_name(part), drop) }
      parts = parts.each_with_index.sort_by { |part, index| [param_name(part), index] }.map(&:first)
      base << "?" << parts.join("&").force_encoding(Encoding::UTF_8) unless parts.empty?
      namespaced_key(namespace, base)
    end

    # The key of a request given as a URL text, `scheme://authority/path?query`. Raises ArgumentError without `://`.
    def url_key(method, url, namespace: "", drop: DEFAULT_DROP)
      scheme, rest = url.split("://", 2)
      raise ArgumentError, "not an absolute URL (no \"://\"): #{url.inspect}" if rest.nil?

      stop = rest.index(%r{[/?#]}) || rest.length
      http_key(method, scheme, rest[0, stop], rest[stop..], namespace: namespace, drop: drop)
    end

    # The selecting values of a request for the header `names` of a marker (spec/FORMAT.md §5.4): per name, in
    # order, `name:` and the values of every line the request has of it (names compared case-insensitively), split
    # on `,`, each element trimmed of spaces and tabs, joined with `,`, then a newline; `name` NUL `absent` newline
    # for a header the request lacks, so "absent" and "empty" select different variants. `request_headers`: the
    # request's header lines as ordered [name, value] pairs.
    def selecting_values(names, request_headers)
      names.map do |name|
        wanted = ascii_lower(name.to_s)
        values = request_headers.filter_map { |header, value| text(value) if ascii_lower(header.to_s) == wanted }
        next "#{name}\u0000absent\n" if values.empty?

        elements = values.flat_map { |value| value.split(",", -1) }
        "#{name}:#{elements.map { |element| element.gsub(/\A[ \t]+|[ \t]+\z/, '') }.join(',')}\n"
      end.join
    end

    # The key of the variant of `base_key` that a request selects under `marker`, the map a base key holds when
    # responses vary (`{"vary" => [names], "generation" => G}`, generation optional; Symbol keys work too), from
    # the request's header lines (spec/FORMAT.md §5.4).
    def variant_key(base_key, marker, request_headers)
      values = selecting_values(marker_field(marker, "vary") || raise(ArgumentError, "a marker has vary"),
                                request_headers)
      generation = marker_field(marker, "generation")
      middle = generation.nil? ? "" : "\u0000generation:#{generation}\n"
      safe_key("#{base_key}\n#{middle}#{values}")
    end

    # Where the response stored under `entry_key` (a base or a variant key) is kept in another coding: identity,
    # gzip, br or zstd (spec/FORMAT.md §5.5).
    def alternate_key(entry_key, coding)
      unless CODINGS.include?(coding.to_s)
        raise ArgumentError, "a coding is one of #{CODINGS.join(', ')}, not #{coding.inspect}"
      end

      safe_key("#{entry_key}\n\u0000coding:#{coding}")
    end

    # What a URL purge removes: the base key (a response or a marker) and the base response's four alternates.
    def url_keys(base_key)
      [base_key] + CODINGS.map { |coding| alternate_key(base_key, coding) }
    end

    def marker_field(marker, name)
      marker.key?(name) ? marker[name] : marker[name.to_sym]
    end

    # A header value as text: bytes that are not UTF-8 read as U+FFFD, as the other languages read them.
    def text(value)
      value = value.to_s
      return value if value.encoding == Encoding::UTF_8 && value.valid_encoding?

      value.dup.force_encoding(Encoding::UTF_8).scrub
    end

    def param_name(part)
      part.split("=", 2).first || ""
    end

    def dropped?(name, patterns)
      patterns.any? do |pattern|
        pattern.end_with?("*") ? name.b.start_with?(pattern.b.chop) : name.b == pattern.b
      end
    end

    def normalize_authority(scheme, authority)
      host = ascii_lower(authority.b.rpartition("@").last)
      return host.chop if host.end_with?(":")

      default_port = DEFAULT_PORTS[scheme]
      return host.delete_suffix(default_port) if default_port && host.end_with?(default_port)

      host
    end

    def ascii_upper(text)
      text.b.tr("a-z", "A-Z").force_encoding(Encoding::UTF_8)
    end

    def ascii_lower(text)
      text.b.tr("A-Z", "a-z").force_encoding(Encoding::UTF_8)
    end

    private_class_method :key_text, :hashed, :marker_field, :text, :param_name, :dropped?, :normalize_authority,
                         :ascii_upper, :ascii_lower
  end
end
