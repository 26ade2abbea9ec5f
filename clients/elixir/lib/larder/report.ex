defmodule Larder.Report do
  @moduledoc """
  What `inspect` prints for an entry (spec/CLI.md): the human form (`label: value` lines) and the JSON form, both
  built from the header and the value's display JSON. Displays are bounded (100 levels, 16 characters per payload
  byte plus 1 MiB), so a hostile entry is refused with `bad_value` or `too_large` rather than printed without end.
  """

  alias Larder.{Compressors, Display, Entry, Error, Msgpack, Response, Serializers}

  defstruct [:header, :stored_bytes, :payload, :value]

  @last_ms_of_9999 253_402_300_799_999
  @max_nesting 100

  @doc "The report of an entry: `{:ok, report}` or `{:error, {kind, detail}}`."
  def of(data, max_size \\ Compressors.default_max_size()) do
    Error.catching(fn ->
      {:ok, {header, payload}} = ok_or_throw(Entry.decode_payload(data, max_size: max_size))

      value =
        if header.kind == :response,
          do: Response.from_payload!(payload),
          else: value_display(header.serializer, payload)

      {:ok,
       %__MODULE__{header: header, stored_bytes: byte_size(data), payload: payload, value: value}}
    end)
  end

  defp ok_or_throw({:ok, _} = ok), do: ok
  defp ok_or_throw({:error, reason}), do: throw({Error, reason})

  defp value_display(:msgpack, payload),
    do: limited(Msgpack.decode!(payload, maps: :ordered), payload)

  defp value_display(:json, payload),
    do: limited(Serializers.deserialize!(:json, payload, :ordered), payload)

  defp value_display(:text, payload),
    do: Display.json_string(Serializers.deserialize!(:text, payload))

  defp value_display(:raw, payload), do: Display.bytes_json(payload)

  defp limited(tree, payload) do
    limit = 16 * byte_size(payload) + 1_048_576

    case Display.display_json(tree, limit: limit, max_depth: @max_nesting) do
      {:ok, text} ->
        text

      {:error, :too_deep} ->
        Error.fail(:bad_value, "value nested more than #{@max_nesting} levels deep")

      {:error, :too_large} ->
        if Display.nests_deeper?(tree, @max_nesting),
          do: Error.fail(:bad_value, "value nested more than #{@max_nesting} levels deep"),
          else:
            Error.fail(
              :too_large,
              "displaying this #{byte_size(payload)}-byte payload would take more than #{limit} characters"
            )
    end
  end

  @doc "A time as spec/CLI.md prints it: the ms, then the UTC time in parentheses (up to year 9999)."
  def time_text(ms) when ms > @last_ms_of_9999, do: Integer.to_string(ms)

  def time_text(ms) do
    t = DateTime.from_unix!(ms, :millisecond)

    date =
      :io_lib.format("~4..0B-~2..0B-~2..0BT~2..0B:~2..0B:~2..0B.~3..0BZ", [
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        rem(ms, 1000)
      ])

    "#{ms} (#{date})"
  end

  @doc "The human form; `cut` shortens every line's text to 200 characters (a terminal without --full)."
  def human(%__MODULE__{} = r, cut \\ false) do
    h = r.header

    lines =
      [
        {"format", "1"},
        {"kind", Atom.to_string(h.kind)},
        {"serializer", Atom.to_string(h.serializer)},
        {"compressor", Atom.to_string(h.compressor)},
        {"created_at", time_text(h.created_at)},
        {"expires_at", if(h.expires_at == 0, do: "never", else: time_text(h.expires_at))},
        {"stale_ms", Integer.to_string(h.stale_ms)},
        {"version", h.version || "(none)"},
        {"tags", if(h.tags == [], do: "(none)", else: Enum.join(h.tags, ", "))},
        {"size", "#{r.stored_bytes} bytes stored, #{byte_size(r.payload)} bytes payload"}
      ] ++ value_lines(r.value)

    Enum.map_join(lines, fn {label, text} ->
      text = if cut, do: Display.cut_text(text, 200), else: text
      String.pad_trailing(label <> ":", 12) <> " " <> text <> "\n"
    end)
  end

  defp value_lines(%Response{} = v) do
    [{"status", Integer.to_string(v.status)}, {"encoding", v.content_encoding}] ++
      Enum.map(v.headers, fn {n, val} ->
        {"header", Display.bytes_text(n) <> ": " <> Display.bytes_text(val)}
      end) ++
      [{"body", "#{byte_size(v.body)} bytes"}]
  end

  defp value_lines(text), do: [{"value", text}]

  @doc "What `--body` prints after the human form: the bytes, or on a terminal their display text."
  def body_output(%__MODULE__{} = r, terminal, cut) do
    body = if match?(%Response{}, r.value), do: r.value.body, else: r.payload

    if terminal do
      text = Display.bytes_text(body)
      text = if cut, do: Display.cut_text(text, 200), else: text
      if text == "" or String.ends_with?(text, "\n"), do: text, else: text <> "\n"
    else
      body
    end
  end

  @doc "The JSON form: one line."
  def json(%__MODULE__{header: h} = r) do
    version = if h.version == nil, do: "null", else: Display.json_string(h.version)
    tags = Enum.map_join(h.tags, ",", &Display.json_string/1)

    ~s({"format":1,"kind":"#{h.kind}","serializer":"#{h.serializer}","compressor":"#{h.compressor}",) <>
      ~s("created_at":#{h.created_at},"expires_at":#{h.expires_at},"stale_ms":#{h.stale_ms},) <>
      ~s("version":#{version},"tags":[#{tags}],"stored_bytes":#{r.stored_bytes},) <>
      ~s("payload_bytes":#{byte_size(r.payload)},"value":#{json_value(r.value)}}\n)
  end

  defp json_value(%Response{} = v) do
    headers =
      Enum.map_join(v.headers, ",", fn {n, val} ->
        "[#{Display.bytes_json(n)},#{Display.bytes_json(val)}]"
      end)

    ~s({"status":#{v.status},"headers":[#{headers}],"content_encoding":"#{v.content_encoding}",) <>
      ~s("body":#{Display.bytes_json(v.body)}})
  end

  defp json_value(text), do: text
end
