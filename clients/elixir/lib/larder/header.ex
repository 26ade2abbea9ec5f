defmodule Larder.Header do
  @moduledoc """
  The entry header (spec/FORMAT.md §1): the fixed 23 bytes and the optional stale window, version and tags.

  Everything a store or a cache decides about an entry (expiry, version, tags) is read here without touching the
  payload, so a store can skip an expired entry without decompressing or deserializing anything.
  """

  import Bitwise
  alias Larder.Error

  @magic <<0xC1, 0x4C>>
  @fixed 23
  @flag_stale 0x01
  @flag_version 0x02
  @flag_tags 0x04
  @reserved 0xF8
  @u16_max 0xFFFF
  @u64_max 0xFFFF_FFFF_FFFF_FFFF

  @kinds {:value, :response}
  @serializers {:raw, :msgpack, :json, :text}
  @compressors {:none, :lz4, :snappy, :zstd, :brotli, :gzip}

  defstruct kind: :value,
            serializer: :msgpack,
            compressor: :none,
            created_at: 0,
            expires_at: 0,
            stale_ms: 0,
            version: nil,
            tags: [],
            payload_offset: @fixed

  @type t :: %__MODULE__{}

  def magic, do: @magic
  def fixed_len, do: @fixed
  def u64_max, do: @u64_max
  def kinds, do: Tuple.to_list(@kinds)
  def serializers, do: Tuple.to_list(@serializers)
  def compressors, do: Tuple.to_list(@compressors)

  @doc "Whether `name` is a compressor of the format."
  for name <- Tuple.to_list(@compressors), do: def(compressor?(unquote(name)), do: true)
  def compressor?(_), do: false

  @doc "The wire id of a compressor name."
  def compressor_id(name), do: index!(@compressors, name, "compressor")

  @doc "`expires_at + stale_ms` capped at 2^64-1, or nil when the entry never expires."
  def hard_expiry(0, _stale), do: nil
  def hard_expiry(expires_at, stale_ms), do: min(expires_at + stale_ms, @u64_max)

  @doc "Only `expires_at` (the cheapest check), or nil when `data` does not start like an entry."
  def peek_expires_at(<<0xC1, 0x4C, _::binary-size(13), expires::little-64, _::binary>>),
    do: expires

  def peek_expires_at(_), do: nil

  @doc "Parses the header of `data`. Returns `{:ok, header}` or `{:error, {kind, detail}}`."
  def read(data) when is_binary(data), do: Error.catching(fn -> {:ok, read!(data)} end)

  @doc false
  # Throws (Larder.Error.fail/2); the public decoders catch.
  def read!(data) do
    size = byte_size(data)

    case data do
      <<m::binary-size(2), _::binary>> when m != @magic ->
        Error.fail(
          :bad_magic,
          "starts with #{Base.encode16(m, case: :lower)} instead of c14c: not a larder entry"
        )

      _ when size < 3 ->
        truncated("fixed header", @fixed, size)

      <<_::binary-size(2), v, _::binary>> when v != 1 ->
        Error.fail(:unsupported_version, "format version #{v} (this reader knows version 1)")

      _ when size < @fixed ->
        truncated("fixed header", @fixed, size)

      <<_::binary-size(3), kind, ser, comp, flags, created::little-64, expires::little-64,
        _::binary>> ->
        kind = name!(@kinds, kind, "kind")
        ser = name!(@serializers, ser, "serializer")
        comp = name!(@compressors, comp, "compressor")

        if (flags &&& @reserved) != 0 do
          Error.fail(:bad_header, "reserved flag bits set: 0x#{Integer.to_string(flags, 16)}")
        end

        if kind == :response and ser != :msgpack do
          Error.fail(:bad_header, "an HTTP response entry must use msgpack, not #{ser}")
        end

        {stale, pos} =
          if (flags &&& @flag_stale) != 0 do
            need(size, @fixed, 8, "stale window")
            <<_::binary-size(@fixed), s::little-64, _::binary>> = data
            {s, @fixed + 8}
          else
            {0, @fixed}
          end

        {version, pos} =
          if (flags &&& @flag_version) != 0,
            do: read_string(data, pos, "version"),
            else: {nil, pos}

        {tags, pos} = if (flags &&& @flag_tags) != 0, do: read_tags(data, pos), else: {[], pos}

        %__MODULE__{
          kind: kind,
          serializer: ser,
          compressor: comp,
          created_at: created,
          expires_at: expires,
          stale_ms: stale,
          version: version,
          tags: tags,
          payload_offset: pos
        }
    end
  end

  defp read_tags(data, pos) do
    need(byte_size(data), pos, 2, "tag count")
    <<_::binary-size(pos), count::little-16, _::binary>> = data

    {tags, pos} =
      Enum.reduce(1..count//1, {[], pos + 2}, fn _, {acc, p} ->
        {tag, p} = read_string(data, p, "tag")
        {[tag | acc], p}
      end)

    {Enum.reverse(tags), pos}
  end

  defp read_string(data, pos, what) do
    need(byte_size(data), pos, 2, what)
    <<_::binary-size(pos), len::little-16, _::binary>> = data
    need(byte_size(data), pos + 2, len, what)
    text = binary_part(data, pos + 2, len)
    unless String.valid?(text), do: Error.fail(:bad_header, "#{what} is not valid UTF-8")
    {text, pos + 2 + len}
  end

  defp need(size, pos, count, what) do
    if pos + count > size, do: truncated(what, pos + count, size)
  end

  defp truncated(what, need, have),
    do: Error.fail(:truncated, "#{what} needs #{need} bytes, entry has #{have}")

  defp name!(names, id, what) do
    if id < tuple_size(names),
      do: elem(names, id),
      else: Error.fail(:unknown_codec, "unknown #{what} id #{id}")
  end

  @doc """
  The header bytes for these fields, with the compressor byte given. Raises ArgumentError for what the format
  cannot hold (times outside u64, a version or tag over 65535 bytes or not UTF-8, more than 65535 tags).
  """
  # The common header (no stale window, version or tags) in one binary construction: the same bytes as below.
  def pack(%__MODULE__{stale_ms: 0, version: nil, tags: tags, created_at: c, expires_at: e} = h)
      when tags in [nil, []] and is_integer(c) and c >= 0 and c <= @u64_max and is_integer(e) and
             e >= 0 and e <= @u64_max do
    <<@magic::binary, 1, index!(@kinds, h.kind, "kind"),
      index!(@serializers, h.serializer, "serializer"),
      index!(@compressors, h.compressor, "compressor"), 0, c::little-64, e::little-64>>
  end

  def pack(%__MODULE__{} = h) do
    u64!(:created_at, h.created_at)
    u64!(:expires_at, h.expires_at)
    u64!(:stale_ms, h.stale_ms)

    tags = h.tags || []
    unless is_list(tags), do: raise(ArgumentError, "tags must be a list of strings")

    flags =
      if(h.stale_ms > 0, do: @flag_stale, else: 0) |||
        if(h.version != nil, do: @flag_version, else: 0) |||
        if tags != [], do: @flag_tags, else: 0

    fixed =
      <<@magic::binary, 1, index!(@kinds, h.kind, "kind"),
        index!(@serializers, h.serializer, "serializer"),
        index!(@compressors, h.compressor, "compressor"), flags, h.created_at::little-64,
        h.expires_at::little-64>>

    stale = if h.stale_ms > 0, do: <<h.stale_ms::little-64>>, else: <<>>
    version = if h.version != nil, do: pack_string("version", h.version), else: <<>>

    tag_bytes =
      case tags do
        [] ->
          <<>>

        _ ->
          if length(tags) > @u16_max,
            do:
              raise(ArgumentError, "#{length(tags)} tags; the format allows at most #{@u16_max}")

          [<<length(tags)::little-16>> | Enum.map(tags, &pack_string("tag", &1))]
      end

    IO.iodata_to_binary([fixed, stale, version, tag_bytes])
  end

  defp u64!(_field, v) when is_integer(v) and v >= 0 and v <= @u64_max, do: :ok

  defp u64!(field, v),
    do: raise(ArgumentError, "#{field} must be an integer in 0..2^64-1, got #{inspect(v)}")

  defp pack_string(field, text) do
    unless is_binary(text) and String.valid?(text),
      do: raise(ArgumentError, "#{field} must be a UTF-8 string, got #{inspect(text)}")

    if byte_size(text) > @u16_max,
      do:
        raise(
          ArgumentError,
          "#{field} is #{byte_size(text)} bytes; the format allows at most #{@u16_max}"
        )

    <<byte_size(text)::little-16, text::binary>>
  end

  # One clause per known name, compiled from the tables above (a search of the list cost more than the rest of pack/1).
  for {names, what} <- [
        {@kinds, "kind"},
        {@serializers, "serializer"},
        {@compressors, "compressor"}
      ],
      {name, i} <- Enum.with_index(Tuple.to_list(names)) do
    defp index!(_names, unquote(name), unquote(what)), do: unquote(i)
  end

  defp index!(names, name, what) do
    raise ArgumentError,
          "unknown #{what} #{inspect(name)} (expected one of: #{Enum.map_join(Tuple.to_list(names), ", ", &to_string/1)})"
  end
end
