defmodule Larder.Compressors do
  @moduledoc """
  The compressors of spec/FORMAT.md §3 in the wire forms every language reads, each decoder bounded by `max_size`.

  LZ4 (block, behind a 4-byte little-endian length) and raw Snappy are this client's own code
  (`Larder.Codecs.*`); gzip is OTP's `:zlib`, fed through `safeInflate` so output past `max_size` stops the work
  early. zstd and brotli go through `Larder.Codecs.Native` (a port to the system libraries) when it is built;
  without it they are `{:unsupported_compressor, name}`, never a misread.
  """

  import Bitwise
  alias Larder.Codecs.{LZ4, Native, Snappy}
  alias Larder.Error

  @default_max_size 64 * 1024 * 1024
  @lz4_max_ratio 255
  @u32_max 0xFFFF_FFFF

  def default_max_size, do: @default_max_size

  @doc "`data` compressed with `name` at `level` (nil: the codec's default). Raises ArgumentError."
  def compress(name, data, level \\ nil)
  def compress(:none, data, _), do: data
  def compress(:lz4, data, _), do: <<byte_size(data)::little-32, LZ4.compress(data)::binary>>
  def compress(:snappy, data, _), do: Snappy.compress(data)
  def compress(:gzip, data, level), do: gzip(data, clamp(level || 6, 0, 9))

  def compress(name, data, level) when name in [:zstd, :brotli],
    do: Native.compress(name, data, level)

  defp clamp(v, lo, hi), do: v |> max(lo) |> min(hi)

  defp gzip(data, level) do
    z = :zlib.open()

    try do
      :ok = :zlib.deflateInit(z, level, :deflated, 31, 8, :default)
      out = :zlib.deflate(z, data, :finish)
      :zlib.deflateEnd(z)
      IO.iodata_to_binary(out)
    after
      :zlib.close(z)
    end
  end

  @doc false
  # Decompresses, refusing to produce more than `max_size` bytes. Throws (Larder.Error).
  def decompress!(:none, data, max), do: check_size(byte_size(data), max) && data

  def decompress!(:lz4, data, max) do
    case data do
      <<declared::little-32, block::binary>> ->
        check_size(declared, max)

        if declared > @lz4_max_ratio * byte_size(block) + 16,
          do:
            corrupt(
              "lz4 size prefix claims #{declared} bytes from a #{byte_size(block)}-byte block, more than LZ4 can expand"
            )

        case LZ4.decompress(block, declared) do
          {:ok, out} -> out
          {:error, detail} -> corrupt(detail)
        end

      _ ->
        corrupt("lz4 payload of #{byte_size(data)} bytes has no 4-byte size prefix")
    end
  end

  def decompress!(:snappy, data, max) do
    case Snappy.preamble(data) do
      {:ok, declared, bytes, body} ->
        check_size(declared, max)

        if bytes > 5,
          do: corrupt("snappy length preamble of #{bytes} bytes (a raw block's takes at most 5)")

        if declared > @u32_max,
          do: corrupt("snappy preamble claims more than a raw block can hold")

        case Snappy.decompress_body(body, declared) do
          {:ok, out} -> out
          {:error, detail} -> corrupt(detail)
        end

      {:error, detail} ->
        corrupt(detail)
    end
  end

  def decompress!(:gzip, data, max), do: gunzip(data, max)

  def decompress!(name, data, max) when name in [:zstd, :brotli],
    do: Native.decompress!(name, data, max)

  @doc "Decompresses: `{:ok, bytes}` or `{:error, reason}` (see `Larder.Error`)."
  def decompress(name, data, max \\ @default_max_size),
    do: Error.catching(fn -> {:ok, decompress!(name, data, max)} end)

  # One gzip member: the header parsed here, the deflate data inflated raw and bounded, then the trailer (CRC-32
  # and length) checked against the output, so a cut-off member, bytes after it or a second member are refused.
  # (OTP's zlib reports neither how much input it used nor a missing trailer.)
  defp gunzip(data, max) do
    {offset, deflated_end} = gzip_header(data)
    deflated = binary_part(data, offset, deflated_end - offset)
    <<crc::little-32, isize::little-32>> = binary_part(data, deflated_end, 8)
    out = inflate_raw(deflated, max)

    if :erlang.crc32(out) != crc or (byte_size(out) &&& @u32_max) != isize,
      do:
        corrupt(
          "gzip member's trailer does not match its data (truncated, or bytes after the member)"
        )

    # The deflate data must end exactly where the trailer begins: one byte less must not finish the stream
    # (else bytes, or a second member, sit between the data and the last 8 bytes).
    if byte_size(deflated) > 0 and
         finishes?(binary_part(deflated, 0, byte_size(deflated) - 1), max),
       do: corrupt("bytes after the gzip member's data")

    out
  end

  defp gzip_header(data) do
    case data do
      <<0x1F, 0x8B, 8, flags, _mtime::32, _xfl, _os, rest::binary>> ->
        if (flags &&& 0xE0) != 0, do: corrupt("gzip header has reserved flags set")
        pos = 10
        {pos, rest} = if (flags &&& 4) != 0, do: gzip_extra(pos, rest), else: {pos, rest}
        {pos, rest} = if (flags &&& 8) != 0, do: gzip_zstring(pos, rest), else: {pos, rest}
        {pos, rest} = if (flags &&& 16) != 0, do: gzip_zstring(pos, rest), else: {pos, rest}
        {pos, rest} = if (flags &&& 2) != 0, do: gzip_skip(pos, rest, 2), else: {pos, rest}
        if byte_size(rest) < 8 + 2, do: corrupt("gzip member is truncated")
        {pos, byte_size(data) - 8}

      _ ->
        corrupt("not a gzip member")
    end
  end

  defp gzip_extra(pos, <<len::little-16, rest::binary>>), do: gzip_skip(pos + 2, rest, len)
  defp gzip_extra(_, _), do: corrupt("gzip member is truncated")

  defp gzip_skip(pos, rest, n) when byte_size(rest) >= n,
    do: {pos + n, binary_part(rest, n, byte_size(rest) - n)}

  defp gzip_skip(_, _, _), do: corrupt("gzip member is truncated")

  defp gzip_zstring(pos, rest) do
    case :binary.match(rest, <<0>>) do
      {i, 1} -> gzip_skip(pos, rest, i + 1)
      :nomatch -> corrupt("gzip member is truncated")
    end
  end

  defp inflate_raw(deflated, max) do
    z = :zlib.open()

    try do
      :ok = :zlib.inflateInit(z, -15)
      out = inflate_loop(z, :zlib.safeInflate(z, deflated), [], 0, max)

      # safeInflate says :finished once the input is used up; inflateEnd tells whether the stream really ended.
      :zlib.inflateEnd(z)
      out
    rescue
      e in ErlangError -> corrupt("gzip: #{inspect(e.original)}")
    after
      :zlib.close(z)
    end
  end

  defp finishes?(deflated, max) do
    inflate_raw(deflated, max)
    true
  catch
    {Error, {:corrupt_payload, _}} -> false
  end

  defp inflate_loop(z, {state, chunk}, acc, total, max) do
    total = total + IO.iodata_length(chunk)

    if total > max,
      do: Error.fail(:too_large, "gzip payload decompresses to more than the #{max}-byte limit")

    case state do
      :finished -> IO.iodata_to_binary(Enum.reverse([chunk | acc]))
      :continue when chunk == [] or chunk == "" -> corrupt("gzip member is truncated")
      :continue -> inflate_loop(z, :zlib.safeInflate(z, []), [chunk | acc], total, max)
      :need_dictionary -> corrupt("gzip: needs a dictionary")
    end
  end

  defp check_size(size, max) do
    if size > max,
      do: Error.fail(:too_large, "payload of #{size} bytes exceeds the #{max}-byte limit"),
      else: true
  end

  defp corrupt(detail), do: Error.fail(:corrupt_payload, detail)
end
