defmodule Larder.Response do
  @moduledoc """
  HTTP response entries (spec/FORMAT.md §4): what the front serves on a hit, as a MessagePack array
  `[status, [[name, value], …], body, content_encoding]`. Header pairs keep their order and duplicates; names,
  values and body are bytes (written as bin); the body may be stored already compressed (`gzip`, `br`, `zstd`).
  """

  import Bitwise
  alias Larder.{Bin, Error, Msgpack}

  @encodings ["identity", "gzip", "br", "zstd"]

  defstruct status: 200, headers: [], body: "", content_encoding: "identity"

  @type t :: %__MODULE__{
          status: 100..999,
          headers: [{binary(), binary()}],
          body: binary(),
          content_encoding: String.t()
        }

  def content_encodings, do: @encodings

  @doc "A response; raises ArgumentError for a status outside 100–999 or an unknown content encoding."
  def new(status, headers \\ [], body \\ "", content_encoding \\ "identity") do
    unless is_integer(status) and status in 100..999,
      do: raise(ArgumentError, "status must be an integer in 100..999, got #{inspect(status)}")

    unless content_encoding in @encodings,
      do: raise(ArgumentError, "content_encoding must be one of #{Enum.join(@encodings, ", ")}")

    headers =
      Enum.map(headers, fn
        {n, v} when is_binary(n) and is_binary(v) ->
          {n, v}

        [n, v] when is_binary(n) and is_binary(v) ->
          {n, v}

        other ->
          raise ArgumentError,
                "a header is a {name, value} pair of binaries, got #{inspect(other)}"
      end)

    unless is_binary(body), do: raise(ArgumentError, "body must be a binary")
    %__MODULE__{status: status, headers: headers, body: body, content_encoding: content_encoding}
  end

  @doc "The first value of header `name` (compared case-insensitively), or nil."
  def header(%__MODULE__{headers: headers}, name) do
    wanted = ascii_lower(name)
    Enum.find_value(headers, fn {n, v} -> if ascii_lower(n) == wanted, do: v end)
  end

  defp ascii_lower(s), do: for(<<c <- s>>, into: "", do: <<if(c in ?A..?Z, do: c + 32, else: c)>>)

  @doc "The MessagePack payload of a kind-1 entry."
  def to_payload(%__MODULE__{} = r) do
    Msgpack.encode!([
      r.status,
      Enum.map(r.headers, fn {n, v} -> [%Bin{data: n}, %Bin{data: v}] end),
      %Bin{data: r.body},
      r.content_encoding
    ])
  end

  @doc false
  # Parses a decompressed kind-1 payload. Throws bad_value.
  def from_payload!(payload) do
    {count, rest} = array_len(payload, "response")
    if count < 4, do: bad("response array has #{count} elements, needs at least 4")
    {status, rest} = uint(rest, "status")
    unless status in 100..999, do: bad("status #{status} is outside 100-999")
    {n, rest} = array_len(rest, "headers")
    if n > byte_size(rest), do: bad("headers: payload ends early")

    {headers, rest} =
      Enum.reduce(1..n//1, {[], rest}, fn _, {acc, rest} ->
        {pair, rest} = array_len(rest, "header pair")
        if pair != 2, do: bad("a header must be a [name, value] pair")
        {name, rest} = bytes(rest, "header name", [:str, :bin])
        {value, rest} = bytes(rest, "header value", [:str, :bin])
        {[{name, value} | acc], rest}
      end)

    {body, rest} = bytes(rest, "body", [:bin])
    {encoding, rest} = bytes(rest, "content_encoding", [:str])
    unless encoding in @encodings, do: bad("unknown content_encoding #{inspect(encoding)}")

    rest =
      Enum.reduce(1..(count - 4)//1, rest, fn _, rest ->
        {_, rest} = Msgpack.read(rest, 0, false, 1024)
        rest
      end)

    if rest != <<>>, do: bad("#{byte_size(rest)} bytes after the response")

    %__MODULE__{
      status: status,
      headers: Enum.reverse(headers),
      body: body,
      content_encoding: encoding
    }
  end

  defp array_len(data, what) do
    case data do
      <<m, rest::binary>> when m in 0x90..0x9F -> {m - 0x90, rest}
      <<0xDC, n::16, rest::binary>> -> {n, rest}
      <<0xDD, n::32, rest::binary>> -> {n, rest}
      _ -> bad("#{what}: expected an array")
    end
  end

  defp uint(data, what) do
    case data do
      <<i, rest::binary>> when i < 0x80 ->
        {i, rest}

      <<0xCC, i, rest::binary>> ->
        {i, rest}

      <<0xCD, i::16, rest::binary>> ->
        {i, rest}

      <<0xCE, i::32, rest::binary>> ->
        {i, rest}

      <<0xCF, i::64, rest::binary>> ->
        {i, rest}

      <<m, i::signed-size(8 * (1 <<< (m - 0xD0)))-big, rest::binary>>
      when m in 0xD0..0xD3 and i >= 0 ->
        {i, rest}

      _ ->
        bad("#{what}: expected an unsigned integer")
    end
  end

  defp bytes(data, what, allowed) do
    {kind, n, rest} =
      case data do
        <<m, rest::binary>> when m in 0xA0..0xBF -> {:str, m - 0xA0, rest}
        <<0xD9, n, rest::binary>> -> {:str, n, rest}
        <<0xDA, n::16, rest::binary>> -> {:str, n, rest}
        <<0xDB, n::32, rest::binary>> -> {:str, n, rest}
        <<0xC4, n, rest::binary>> -> {:bin, n, rest}
        <<0xC5, n::16, rest::binary>> -> {:bin, n, rest}
        <<0xC6, n::32, rest::binary>> -> {:bin, n, rest}
        _ -> bad("#{what}: expected #{Enum.join(allowed, " or ")}")
      end

    unless kind in allowed,
      do: bad("#{what}: expected #{Enum.join(allowed, " or ")}, found #{kind}")

    case rest do
      <<b::binary-size(n), rest::binary>> -> {b, rest}
      _ -> bad("#{what}: payload ends early")
    end
  end

  defp bad(detail), do: Error.fail(:bad_value, detail)
end
