defmodule Larder.Serializers do
  @moduledoc """
  The serializers of spec/FORMAT.md §2: MessagePack (the default), JSON, raw bytes and UTF-8 text. Serializing
  raises ArgumentError for a value the serializer cannot hold; deserializing throws `bad_value` (callers use
  `Larder.Entry.decode/2`).
  """

  alias Larder.{Error, JSON, Msgpack}

  @doc "`value` serialized by `name`."
  def serialize(:msgpack, value), do: Msgpack.encode!(value)
  def serialize(:json, value), do: JSON.encode!(value)

  def serialize(:text, value) when is_binary(value) do
    if String.valid?(value), do: value, else: raise(ArgumentError, "text is not valid UTF-8")
  end

  def serialize(:raw, value) when is_binary(value), do: value

  def serialize(name, value) when name in [:text, :raw],
    do: raise(ArgumentError, "the #{name} serializer takes a binary, got #{inspect(value)}")

  def serialize(name, _), do: raise(ArgumentError, "unknown serializer #{inspect(name)}")

  @doc false
  # The value in a decompressed payload. `maps`: :map (default) or :ordered. Throws bad_value.
  def deserialize!(name, payload, maps \\ :map)
  def deserialize!(:msgpack, payload, maps), do: Msgpack.decode!(payload, maps: maps)
  def deserialize!(:raw, payload, _), do: payload

  def deserialize!(:text, payload, _) do
    if String.valid?(payload), do: payload, else: Error.fail(:bad_value, "text is not UTF-8")
  end

  def deserialize!(:json, payload, maps) do
    case JSON.decode(payload, objects: maps) do
      {:ok, v} -> v
      {:error, m} -> Error.fail(:bad_value, "json: #{m}")
    end
  end
end
