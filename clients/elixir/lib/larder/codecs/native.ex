defmodule Larder.Codecs.Native do
  @moduledoc """
  zstd and brotli, which this client does not implement itself. Until a port to the system libraries is built,
  compressing with them is an ArgumentError and decoding them is `{:unsupported_compressor, name}`: the entry may
  well be valid, this client cannot read it, and it never guesses.
  """

  alias Larder.Error

  @doc "Whether zstd and brotli are available."
  def available?, do: false

  def compress(name, _data, _level),
    do:
      raise(ArgumentError, "unsupported_compressor: #{name} (this client has no #{name} encoder)")

  def decompress!(name, _data, _max), do: Error.unsupported(name)
end
