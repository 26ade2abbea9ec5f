defmodule Larder.Bin do
  @moduledoc """
  Bytes to write as MessagePack bin rather than str. A plain Elixir binary is written as str (text); wrap bytes
  that are not text (`%Larder.Bin{data: bytes}`) so readers in other languages get bytes, not a string.
  Decoded bin values come back as plain binaries.
  """
  defstruct data: ""
  @type t :: %__MODULE__{data: binary()}
end

defmodule Larder.Ext do
  @moduledoc """
  A MessagePack ext value: its type (-128..127) and data, kept opaque. Ext 80 (a Python pickle) and 101 (a Ruby
  Marshal dump) are signed values other languages write (spec/FORMAT.md §2); Elixir never interprets them.
  """
  defstruct type: 0, data: ""
  @type t :: %__MODULE__{type: integer(), data: binary()}
end

defmodule Larder.Ordered do
  @moduledoc """
  A map as its `{key, value}` pairs in order. Elixir maps do not keep insertion order (past 32 keys, not even
  sorted), and byte identity across languages needs the order of the source document (spec/FORMAT.md §2):
  the JSON reader gives objects as `Ordered` when asked, the MessagePack encoder writes them in that order, and
  display keeps the order and duplicate keys of a stored map.
  """
  defstruct pairs: []
  @type t :: %__MODULE__{pairs: [{term(), term()}]}

  @doc "The pairs as a plain map (the last of duplicate keys wins), recursively."
  def to_map(%__MODULE__{pairs: pairs}), do: Map.new(pairs, fn {k, v} -> {plain(k), plain(v)} end)

  @doc "A value with every `Ordered` inside turned into a map."
  def plain(%__MODULE__{} = o), do: to_map(o)
  def plain(list) when is_list(list), do: Enum.map(list, &plain/1)
  def plain(other), do: other
end
