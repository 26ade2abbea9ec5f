defmodule Larder.Ring do
  @moduledoc """
  memcached server selection: classic ketama (spec/STORES.md §4.2), as libmemcached and twemproxy compute it, so
  every language sends a key to the same server. `spec/vectors/ring.json` checks it.
  """

  defstruct points: {}, values: {}

  @doc """
  The continuum of `servers` (`{host, port, weight}` in the URL's order); `indexes` gives each one's index in
  the full list, so a ring rebuilt without an ejected server still answers with the original indexes.
  """
  def new(servers, indexes \\ nil) do
    indexes = indexes || Enum.to_list(0..(length(servers) - 1)//1)
    total = servers |> Enum.map(&elem(&1, 2)) |> Enum.sum()
    count = length(servers)

    points =
      servers
      |> Enum.zip(indexes)
      |> Enum.flat_map(fn {{host, port, weight}, index} ->
        n = floor(weight / total * 160 / 4 * count + 1.0e-10)

        Enum.flat_map(0..(n - 1)//1, fn i ->
          name = if port == 11_211, do: "#{host}-#{i}", else: "#{host}:#{port}-#{i}"
          <<a::little-32, b::little-32, c::little-32, d::little-32>> = :crypto.hash(:md5, name)
          [{a, index}, {b, index}, {c, index}, {d, index}]
        end)
      end)
      |> Enum.sort()

    %__MODULE__{
      points: List.to_tuple(points),
      values: points |> Enum.map(&elem(&1, 0)) |> List.to_tuple()
    }
  end

  @doc "The points, as `{value, server index}` in order."
  def points(%__MODULE__{points: p}), do: Tuple.to_list(p)

  @doc "u32 little-endian of the first four bytes of MD5(key)."
  def hash(key) do
    <<h::little-32, _::binary>> = :crypto.hash(:md5, key)
    h
  end

  @doc "The server index for a stored key, or nil when the ring is empty."
  def server(%__MODULE__{points: {}}, _key), do: nil

  def server(%__MODULE__{points: points, values: values}, key) do
    h = hash(key)
    i = search(values, h, 0, tuple_size(values))
    i = if i == tuple_size(values), do: 0, else: i
    elem(elem(points, i), 1)
  end

  # The first index whose value is >= h (tuple_size when none).
  defp search(_values, _h, lo, hi) when lo >= hi, do: lo

  defp search(values, h, lo, hi) do
    mid = div(lo + hi, 2)

    if elem(values, mid) >= h,
      do: search(values, h, lo, mid),
      else: search(values, h, mid + 1, hi)
  end
end
