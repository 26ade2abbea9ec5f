defmodule Larder.Entry do
  @moduledoc """
  Whole entries (spec/FORMAT.md): header + payload, encoded and decoded.

  Encoding serializes the value and applies the compression rule of §3: compress only a payload of at least
  `threshold` bytes, and keep the compressed form only when it is strictly shorter; the compressor byte records
  what was done. Decoding parses the header, decompresses within `max_size` and deserializes; any invalid input is
  `{:error, {kind, detail}}` with a kind of §7, never an exception.
  """

  alias Larder.{Compressors, Error, Header, Response, Serializers}

  defstruct kind: :value,
            serializer: :msgpack,
            compressor: :none,
            created_at: 0,
            expires_at: 0,
            stale_ms: 0,
            version: nil,
            tags: [],
            value: nil

  @type t :: %__MODULE__{}

  @default_threshold 1024

  @doc "Milliseconds since the Unix epoch."
  def now_ms, do: System.os_time(:millisecond)

  @doc """
  Encodes `value` as a value entry (kind 0). Options: `serializer` (`:msgpack`, `:json`, `:text`, `:raw`),
  `compressor` (`:lz4` default, `:snappy`, `:gzip`, `:none`; `:zstd`/`:brotli` when available), `threshold`
  (1024), `level`, `created_at` (ms, default now), `ttl_ms` or `expires_at` (0 = never), `stale_ms`, `version`,
  `tags`. Raises ArgumentError for what the format cannot hold.
  """
  def encode(value, opts \\ []) do
    serializer = Keyword.get(opts, :serializer, :msgpack)
    build(:value, serializer, Serializers.serialize(serializer, value), opts)
  end

  @doc "Encodes a `Larder.Response` as a kind-1 entry (serializer msgpack). Options as for `encode/2`."
  def encode_response(%Response{} = r, opts \\ []),
    do: build(:response, :msgpack, Response.to_payload(r), opts)

  @doc false
  # What Larder.Cache writes on every miss: a MessagePack value entry from fields already known, without an
  # options list to search (the same checks and bytes as encode/2 with these options).
  def encode_value(value, compressor, ttl_ms, stale_ms, version, tags)
      when stale_ms in [nil, 0] and version == nil and tags in [nil, []] and
             (ttl_ms == nil or (is_integer(ttl_ms) and ttl_ms >= 0)) do
    payload = Larder.Msgpack.encode_iodata!(value)

    if Header.compressor?(compressor) and
         (compressor == :none or IO.iodata_length(payload) < @default_threshold) do
      # Stored as it is (no compression, as assemble/12 decides): the header and the payload in one copy, where
      # building the payload's binary and then the entry's copied it twice.
      created_at = now_ms()
      expires_at = if ttl_ms in [nil, 0], do: 0, else: min(created_at + ttl_ms, Header.u64_max())

      header = %Header{
        kind: :value,
        serializer: :msgpack,
        compressor: :none,
        created_at: created_at,
        expires_at: expires_at
      }

      IO.iodata_to_binary([Header.pack(header) | payload])
    else
      assemble(
        :value,
        :msgpack,
        IO.iodata_to_binary(payload),
        compressor,
        @default_threshold,
        nil,
        nil,
        ttl_ms,
        nil,
        stale_ms,
        version,
        tags
      )
    end
  end

  def encode_value(value, compressor, ttl_ms, stale_ms, version, tags) do
    assemble(
      :value,
      :msgpack,
      Larder.Msgpack.encode!(value),
      compressor,
      @default_threshold,
      nil,
      nil,
      ttl_ms,
      nil,
      stale_ms,
      version,
      tags
    )
  end

  defp build(kind, serializer, payload, opts) do
    assemble(
      kind,
      serializer,
      payload,
      Keyword.get(opts, :compressor, :lz4),
      Keyword.get(opts, :threshold, @default_threshold),
      Keyword.get(opts, :level),
      Keyword.get(opts, :created_at),
      Keyword.get(opts, :ttl_ms),
      Keyword.get(opts, :expires_at),
      Keyword.get(opts, :stale_ms),
      Keyword.get(opts, :version),
      Keyword.get(opts, :tags)
    )
  end

  defp assemble(
         kind,
         serializer,
         payload,
         compressor,
         threshold,
         level,
         created_at,
         ttl_ms,
         expires_at,
         stale_ms,
         version,
         tags
       ) do
    created_at = created_at || now_ms()

    expires_at =
      case {ttl_ms, expires_at} do
        {nil, nil} -> 0
        {nil, e} -> e
        {0, nil} -> 0
        {t, nil} when is_integer(t) and t > 0 -> min(created_at + t, Header.u64_max())
        _ -> raise ArgumentError, "give ttl_ms (a non-negative integer) or expires_at, not both"
      end

    unless Header.compressor?(compressor),
      do: raise(ArgumentError, "unknown compressor #{inspect(compressor)}")

    unless is_integer(threshold) and threshold >= 0,
      do: raise(ArgumentError, "threshold must be a non-negative integer")

    {compressor, body} =
      if compressor != :none and byte_size(payload) >= threshold do
        packed = Compressors.compress(compressor, payload, level)

        if byte_size(packed) < byte_size(payload),
          do: {compressor, packed},
          else: {:none, payload}
      else
        {:none, payload}
      end

    header = %Header{
      kind: kind,
      serializer: serializer,
      compressor: compressor,
      created_at: created_at,
      expires_at: expires_at,
      stale_ms: stale_ms || 0,
      version: version,
      tags: tags || []
    }

    <<Header.pack(header)::binary, body::binary>>
  end

  @doc """
  Decodes a whole entry: `{:ok, entry}` or `{:error, reason}`. Options: `max_size` (default 64 MiB) bounds the
  decompressed payload; `maps: :ordered` gives MessagePack and JSON maps as `Larder.Ordered` (order and duplicates).
  """
  def decode(data, opts \\ []) when is_binary(data) do
    Error.catching(fn -> {:ok, decode!(data, opts)} end)
  end

  @doc false
  def decode!(data, opts) do
    {header, payload} = payload!(data, opts)

    value =
      if header.kind == :response,
        do: Response.from_payload!(payload),
        else: Serializers.deserialize!(header.serializer, payload, Keyword.get(opts, :maps, :map))

    %__MODULE__{
      kind: header.kind,
      serializer: header.serializer,
      compressor: header.compressor,
      created_at: header.created_at,
      expires_at: header.expires_at,
      stale_ms: header.stale_ms,
      version: header.version,
      tags: header.tags,
      value: value
    }
  end

  @doc "The header and the decompressed (still serialized) payload: `{:ok, {header, payload}}` or an error."
  def decode_payload(data, opts \\ []) when is_binary(data),
    do: Error.catching(fn -> {:ok, payload!(data, opts)} end)

  defp payload!(data, opts) do
    header = Header.read!(data)
    max = Keyword.get(opts, :max_size, Compressors.default_max_size())
    off = header.payload_offset

    {header,
     Compressors.decompress!(
       header.compressor,
       binary_part(data, off, byte_size(data) - off),
       max
     )}
  end

  @doc "The moment past which the entry may not be served at all, even stale; nil = never."
  def hard_expiry(%__MODULE__{expires_at: e, stale_ms: s}), do: Header.hard_expiry(e, s)

  @doc "Whether the entry is past `expires_at` at `now` (it may still be within its stale window)."
  def expired?(%__MODULE__{expires_at: 0}, _now), do: false
  def expired?(%__MODULE__{expires_at: e}, now), do: now >= e
end
