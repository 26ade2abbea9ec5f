# frozen_string_literal: true

require "base64"
require_relative "../larder"
require_relative "report"

module Larder
  # `larder encode|inspect|key`: the format commands every larder implementation ships (spec/CLI.md).
  #
  # Same flags, same output and same exit statuses as the Rust `larder` binary and `python -m larder`: 0 on success,
  # 1 when `inspect` is given an invalid entry, 2 for a usage error or bad input; error messages are one line on
  # stderr beginning with `larder: `.
  module CLI
    # A command failed; `status` is its exit status, the message its one line on stderr.
    class Failure < StandardError
      attr_reader :status

      def initialize(status, message)
        @status = status
        super(message)
      end
    end

    # Overrides terminal detection: `1` treats stdout as a terminal, `0` as not.
    FORCE_TTY_VAR = "LARDER_FORCE_TTY"
    NOT_UTF8_TEXT = "stdin is not UTF-8 text (--serializer text); use --serializer raw for other bytes"
    U64 = /\A\+?[0-9]+\z/
    I32 = /\A[+-]?[0-9]+\z/

    # option => [metavar, kind, choices]; kind :flag, :once or :many.
    COMMANDS = {
      "encode" => {
        "--serializer" => ["SERIALIZER", :once, Header::SERIALIZERS],
        "--compressor" => ["COMPRESSOR", :once, Header::COMPRESSORS],
        "--ttl" => ["SECS", :once, :u64], "--stale" => ["SECS", :once, :u64],
        "--created-at" => ["MS", :once, :u64], "--version" => ["V", :once, nil], "--tag" => ["T", :many, nil],
        "--threshold" => ["BYTES", :once, :u64], "--level" => ["N", :once, :i32],
        "--kind" => ["KIND", :once, %w[value response]], "--json-input" => [nil, :flag, nil]
      },
      "inspect" => {
        "--json" => [nil, :flag, nil], "--max-size" => ["BYTES", :once, :u64], "--body" => [nil, :flag, nil],
        "--full" => [nil, :flag, nil]
      },
      "key" => {
        "--method" => ["METHOD", :once, nil], "--namespace" => ["NAMESPACE", :once, nil],
        "--drop" => ["PARAM", :many, nil], "--no-default-drops" => [nil, :flag, nil]
      }
    }.freeze

    HELP = {
      nil => "Usage: larder <COMMAND>\n\nEncode, inspect and key larder entries (spec/FORMAT.md, spec/CLI.md).\n\n" \
             "Commands:\n  encode   encode stdin as an entry, written to stdout\n  " \
             "inspect  print an entry's header and decoded value\n  key      print the cache key of a request URL\n",
      "encode" => "Usage: larder encode [--serializer raw|msgpack|json|text] " \
                  "[--compressor none|lz4|snappy|zstd|brotli|gzip]\n#{' ' * 7}" \
                  "[--ttl SECS] [--stale SECS] [--created-at MS] [--version V] [--tag T]...\n#{' ' * 7}" \
                  "[--threshold BYTES] [--level N] [--kind value|response] [--json-input]\n\n" \
                  "Encode stdin as a larder entry, written to stdout. With --serializer text, stdin's text (UTF-8) " \
                  "is stored verbatim;\nwith raw, stdin's bytes; with msgpack or json, stdin is one JSON document.\n",
      "inspect" => "Usage: larder inspect [FILE|-] [--json] [--max-size BYTES] [--body] [--full]\n\n" \
                   "Print an entry's header and decoded value; exits 1 naming the error kind for an invalid entry.\n",
      "key" => "Usage: larder key URL [--method M] [--namespace N] [--drop PARAM]... [--no-default-drops]\n\n" \
               "Print the cache key of a request URL (spec/FORMAT.md §5.3).\n"
    }.freeze

    module_function

    # Runs one command and returns its exit status. Streams default to the process's own (written as bytes).
    def main(argv, stdin: $stdin, stdout: $stdout, stderr: $stderr)
      stdin.binmode
      stdout.binmode
      output = run(argv, stdin, stdout)
      stdout.write(output)
      stdout.flush
      0
    rescue Failure => e
      stderr.write("larder: #{e.message}\n")
      stderr.flush
      e.status
    end

    def run(argv, stdin, stdout)
      command, *rest = argv
      return HELP[nil] if ["-h", "--help"].include?(command)
      raise Failure.new(2, "a subcommand is required (see --help)") if command.nil?
      raise Failure.new(2, "unrecognized subcommand '#{command}' (see --help)") unless COMMANDS.key?(command)

      options, positionals = parse(command, rest)
      return HELP[command] if options[:help]

      case command
      when "encode" then encode(options, positionals, stdin)
      when "inspect" then inspect_entry(options, positionals, stdin, stdout)
      else key(options, positionals)
      end
    end

    # Options (by name, without dashes) and positional arguments, as clap parses them.
    def parse(command, args)
      options = {}
      positionals = []
      args = args.dup
      until args.empty?
        arg = args.shift
        if arg == "--"
          positionals.concat(args)
          break
        elsif ["-h", "--help"].include?(arg)
          options[:help] = true
        elsif !arg.start_with?("-") || arg == "-"
          positionals << arg
        else
          parse_option(COMMANDS.fetch(command), arg, args, options)
        end
      end
      [options, positionals]
    end

    def parse_option(spec, arg, args, options)
      name, inline = arg.split("=", 2)
      metavar, kind, choices = spec[name]
      raise Failure.new(2, "unexpected argument '#{arg}' found (see --help)") if kind.nil?

      key = name.delete_prefix("--").tr("-", "_").to_sym
      label = metavar ? "#{name} <#{metavar}>" : name
      if kind == :flag
        raise Failure.new(2, "unexpected value '#{inline}' for '#{name}' found (see --help)") if inline
        raise Failure.new(2, "the argument '#{label}' cannot be used multiple times (see --help)") if options[key]

        options[key] = true
        return
      end
      value = inline || args.shift
      raise Failure.new(2, "a value is required for '#{label}' but none was supplied (see --help)") if value.nil?

      value = convert(value, label, choices)
      if kind == :many
        (options[key] ||= []) << value
      else
        raise Failure.new(2, "the argument '#{label}' cannot be used multiple times (see --help)") if options.key?(key)

        options[key] = value
      end
    end

    def convert(value, label, choices)
      case choices
      when Array
        return value if choices.include?(value)

        raise Failure.new(2, "invalid value '#{value}' for '#{label}' (see --help)")
      when :u64
        return value.to_i if value.match?(U64) && value.to_i <= Header::U64_MAX

        raise Failure.new(2, "invalid value '#{value}' for '#{label}': expected an integer in 0..2^64-1 (see --help)")
      when :i32
        return value.to_i if value.match?(I32) && value.to_i.between?(-2**31, (2**31) - 1)

        raise Failure.new(2, "invalid value '#{value}' for '#{label}': expected a 32-bit integer (see --help)")
      else value
      end
    end

    def encode(options, positionals, stdin)
      raise Failure.new(2, "unexpected argument '#{positionals.first}' found (see --help)") unless positionals.empty?

      data = read_stdin(stdin)
      serializer = options.fetch(:serializer, "msgpack")
      entry_options = {
        compressor: options.fetch(:compressor, "lz4"), threshold: options.fetch(:threshold, DEFAULT_THRESHOLD),
        level: options[:level], created_at: options[:created_at],
        ttl_ms: [options.fetch(:ttl, 0) * 1000, Header::U64_MAX].min,
        stale_ms: [options.fetch(:stale, 0) * 1000, Header::U64_MAX].min,
        version: options[:version], tags: options.fetch(:tag, [])
      }
      if options[:kind] == "response"
        raise Failure.new(2, "--kind response needs --serializer msgpack") if serializer != "msgpack"

        return Larder.encode_response(response_from_json(json_document(data)), **entry_options)
      end

      value = if %w[text raw].include?(serializer) && !options[:json_input]
                verbatim_value(data, serializer)
              else
                value_from_json(json_document(data), serializer)
              end
      Larder.encode(value, serializer: serializer, **entry_options)
    rescue TypeError, ArgumentError => e
      raise Failure.new(2, "cannot encode: #{e.message}")
    end

    def inspect_entry(options, positionals, stdin, stdout)
      raise Failure.new(2, "unexpected argument '#{positionals[1]}' found (see --help)") if positionals.size > 1

      file = positionals.first || "-"
      data = file == "-" ? read_stdin(stdin) : read_file(file)
      begin
        report = Report.of(data, options.fetch(:max_size, Compressors::DEFAULT_MAX_SIZE))
      rescue InvalidEntry => e
        raise Failure.new(1, "invalid entry: #{e.kind}: #{e.detail}")
      end
      return report.json.b if options[:json]

      terminal = terminal?(stdout)
      cut = terminal && !options[:full]
      output = report.human(cut: cut).b
      output << "\n" << report.body_output(terminal: terminal, cut: cut) if options[:body]
      output
    end

    def key(options, positionals)
      if positionals.empty?
        raise Failure.new(2,
                          "the following required arguments were not provided: <URL> (see --help)")
      end
      raise Failure.new(2, "unexpected argument '#{positionals[1]}' found (see --help)") if positionals.size > 1

      drop = (options[:no_default_drops] ? [] : Keys::DEFAULT_DROP.dup) + options.fetch(:drop, [])
      key = Keys.url_key(options.fetch(:method, "GET"), positionals.first, namespace: options.fetch(:namespace, ""),
                                                                           drop: drop)
      "#{key}\n".b
    rescue ArgumentError => e
      raise Failure.new(2, e.message)
    end

    def terminal?(stdout)
      forced = ENV.fetch(FORCE_TTY_VAR, nil)
      return forced == "1" if %w[0 1].include?(forced)

      stdout.respond_to?(:tty?) && stdout.tty?
    end

    def read_stdin(stdin)
      stdin.read.b
    rescue IOError, SystemCallError => e
      raise Failure.new(2, "cannot read stdin: #{e.message}")
    end

    def read_file(path)
      File.binread(path)
    rescue SystemCallError => e
      raise Failure.new(2, "cannot read #{path}: #{e.message.sub(/ @ .*/, '')}")
    end

    def json_document(data)
      text = data.dup.force_encoding(Encoding::UTF_8)
      raise Failure.new(2, "stdin is not a JSON document: not UTF-8") unless text.valid_encoding?

      Serializers.parse_json_text(text)
    rescue ArgumentError => e
      raise Failure.new(2, "stdin is not a JSON document: #{e.message}")
    end

    def verbatim_value(data, serializer)
      return data if serializer == "raw"

      text = data.dup.force_encoding(Encoding::UTF_8)
      raise Failure.new(2, NOT_UTF8_TEXT) unless text.valid_encoding?

      text
    end

    def value_from_json(document, serializer)
      case serializer
      when "text"
        unless document.is_a?(String)
          raise Failure.new(2,
                            "--serializer text --json-input needs a JSON string on stdin")
        end

        document
      when "raw"
        bytes_from_json(document, "--serializer raw --json-input needs a JSON string or {\"$base64\": ...}")
      else document
      end
    end

    def response_from_json(document)
      status = document.is_a?(Hash) ? document["status"] : nil
      raise Failure.new(2, "a response document needs an integer \"status\"") unless status.is_a?(Integer)

      headers = response_headers(document)
      body = if document.key?("body")
               bytes_from_json(document["body"],
                               "\"body\" must be a string or {\"$base64\": ...}")
             else
               ""
             end
      encoding = document.fetch("content_encoding", "identity")
      raise Failure.new(2, "\"content_encoding\" must be a string") unless encoding.is_a?(String)

      canonical = encoding.ascii_only? ? encoding.downcase : encoding
      unless HttpResponse::CONTENT_ENCODINGS.include?(canonical)
        raise Failure.new(2, "unknown content encoding #{encoding.inspect} (expected identity, gzip, br or zstd)")
      end

      HttpResponse.new(status, headers, body, canonical)
    rescue ArgumentError => e
      raise Failure.new(2, e.message)
    end

    def response_headers(document)
      return [] unless document.key?("headers")
      raise Failure.new(2, "\"headers\" must be a list of [name, value]") unless document["headers"].is_a?(Array)

      document["headers"].map do |pair|
        raise Failure.new(2, "each header must be a [name, value] pair") unless pair.is_a?(Array) && pair.size == 2

        [bytes_from_json(pair[0], "a header name must be a string"),
         bytes_from_json(pair[1], "a header value must be a string")]
      end
    end

    def bytes_from_json(value, what)
      return value.b if value.is_a?(String)

      if value.is_a?(Hash) && value.size == 1 && value["$base64"].is_a?(String)
        begin
          return Base64.strict_decode64(value["$base64"])
        rescue ArgumentError => e
          raise Failure.new(2, "bad base64: #{e.message}")
        end
      end
      raise Failure.new(2, what)
    end
  end
end
