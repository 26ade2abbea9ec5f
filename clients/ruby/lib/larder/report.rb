# frozen_string_literal: true

require_relative "display"
require_relative "entry"

module Larder
  # What `inspect` prints (spec/CLI.md): an entry's header and value, as labelled lines or as one JSON object, and on
  # request its body.
  #
  # The text is specified to the byte so that every implementation's `inspect` can be compared with every other's;
  # the value is decoded for display here (pairs kept, exact ext bytes, see MsgpackReader) rather than through
  # `Larder.decode`. A person reading on a terminal gets long texts cut, which programs never see.
  class Report
    # The last millisecond of year 9999: later times print without their date.
    LAST_MS_OF_9999 = 253_402_300_799_999
    DISPLAY_EXPANSION = 16
    DISPLAY_ALLOWANCE = 1 << 20

    attr_reader :header, :stored_bytes, :payload_bytes, :value, :payload

    def initialize(header, stored_bytes, value, payload)
      @header = header
      @stored_bytes = stored_bytes
      @payload_bytes = payload.bytesize
      @value = value
      @payload = payload
    end

    # Decodes `data` fully. Raises InvalidEntry whenever `decode` would, and also for a value nested more than 100
    # deep (bad_value) or whose display would be unreasonably long (too_large).
    def self.of(data, max_size = Compressors::DEFAULT_MAX_SIZE)
      header, payload = Larder.decode_payload(data, max_size: max_size)
      value = if header.kind == "response"
                HttpResponse.from_payload(payload)
              else
                value_display(header.serializer, payload)
              end
      new(header, data.bytesize, value, payload)
    end

    # The display JSON of a value payload.
    def self.value_display(serializer, payload)
      case serializer
      when "msgpack" then limited_display(MsgpackReader.read_whole_tree(payload), payload)
      when "json"
        tree = Serializers.load_json(payload, object_class: MsgpackReader::MapPairs)
        limited_display(tree, payload)
      when "text" then Display.quote(Serializers.decode_text(payload))
      else Display.bytes_json(payload)
      end
    end

    def self.limited_display(tree, payload)
      limit = (DISPLAY_EXPANSION * payload.bytesize) + DISPLAY_ALLOWANCE
      Display.display_json(tree, limit: limit, max_depth: Serializers::MAX_NESTING)
    rescue Display::TooDeep
      raise InvalidEntry.new("bad_value", "value nested more than #{Serializers::MAX_NESTING} levels deep")
    rescue Display::TooLarge
      if Display.nests_deeper?(tree, Serializers::MAX_NESTING)
        raise InvalidEntry.new("bad_value", "value nested more than #{Serializers::MAX_NESTING} levels deep")
      end

      raise InvalidEntry.new("too_large", "displaying this #{payload.bytesize}-byte payload would take more than " \
                                          "#{limit} characters")
    end

    # `ms (YYYY-MM-DDTHH:MM:SS.mmmZ)`, or just `ms` past the year 9999.
    def self.time_text(ms)
      return ms.to_s if ms > LAST_MS_OF_9999

      moment = Time.at(ms / 1000, ms % 1000, :millisecond).utc
      "#{ms} (#{moment.strftime('%Y-%m-%dT%H:%M:%S')}.#{format('%03d', ms % 1000)}Z)"
    end

    # The labelled-lines form, each line `printf "%-12s %s\n"`; with `cut`, each text is cut to CUT_AT characters.
    def human(cut: false)
      lines = header_lines
      if @value.is_a?(HttpResponse)
        lines << ["status", @value.status.to_s] << ["encoding", @value.content_encoding]
        @value.headers.each do |name, value|
          lines << ["header", "#{Display.bytes_text(name)}: #{Display.bytes_text(value)}"]
        end
        lines << ["body", "#{@value.body.bytesize} bytes"]
      else
        lines << ["value", @value]
      end
      lines.map do |label, text|
        format("%-12s %s\n", "#{label}:", cut ? Display.cut_text(text, Display::CUT_AT) : text)
      end.join
    end

    # What `--body` prints after the empty line: a response's body as stored, or a value's payload. On a terminal,
    # their display text (cut with `cut`) and a newline unless it is empty or ends with one.
    def body_output(terminal:, cut:)
      body = @value.is_a?(HttpResponse) ? @value.body : @payload
      return body.b unless terminal

      text = Display.bytes_text(body)
      text = Display.cut_text(text, Display::CUT_AT) if cut
      text += "\n" unless text.empty? || text.end_with?("\n")
      text.b
    end

    # The one-line JSON form, ending with a newline.
    def json
      h = @header
      version = h.version.nil? ? "null" : Display.quote(h.version)
      tags = h.tags.map { |tag| Display.quote(tag) }.join(",")
      "{\"format\":1,\"kind\":#{Display.quote(h.kind)},\"serializer\":#{Display.quote(h.serializer)}," \
        "\"compressor\":#{Display.quote(h.compressor)},\"created_at\":#{h.created_at},\"expires_at\":#{h.expires_at}," \
        "\"stale_ms\":#{h.stale_ms},\"version\":#{version},\"tags\":[#{tags}],\"stored_bytes\":#{@stored_bytes}," \
        "\"payload_bytes\":#{@payload_bytes},\"value\":#{json_value}}\n"
    end

    private

    def header_lines
      h = @header
      [
        %w[format 1], ["kind", h.kind], ["serializer", h.serializer], ["compressor", h.compressor],
        ["created_at", Report.time_text(h.created_at)],
        ["expires_at", h.expires_at.zero? ? "never" : Report.time_text(h.expires_at)],
        ["stale_ms", h.stale_ms.to_s], ["version", h.version.nil? ? "(none)" : h.version],
        ["tags", h.tags.empty? ? "(none)" : h.tags.join(", ")],
        ["size", "#{@stored_bytes} bytes stored, #{@payload_bytes} bytes payload"]
      ]
    end

    def json_value
      return @value unless @value.is_a?(HttpResponse)

      headers = @value.headers.map { |name, value| "[#{Display.bytes_json(name)},#{Display.bytes_json(value)}]" }
      "{\"status\":#{@value.status},\"headers\":[#{headers.join(',')}]," \
        "\"content_encoding\":#{Display.quote(@value.content_encoding)},\"body\":#{Display.bytes_json(@value.body)}}"
    end
  end
end
