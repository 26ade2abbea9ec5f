# The fast paths of issue 34 write the bytes the general ones did: MessagePack maps in Enum.map's order (small maps
# from :maps.to_list, large ones from :maps.fold), Larder.Cache's entry (Entry.encode_value/6) byte for byte what
# Entry.encode/2 writes with the same options, and LZ4 blocks that decode to the input.
defmodule Larder.EncodePathsTest do
  # Not async: the memory-bound tests measure the whole VM, and these build megabytes of values.
  use ExUnit.Case, async: false

  alias Larder.{Entry, Header, Msgpack}

  # What the encoder wrote before its fast paths: a map's pairs in Enum.map's order.
  defp reference(m) when is_map(m) and not is_struct(m) do
    head = if map_size(m) < 16, do: <<0x80 + map_size(m)>>, else: <<0xDE, map_size(m)::16>>
    IO.iodata_to_binary([head | Enum.map(m, fn {k, v} -> [reference(k), reference(v)] end)])
  end

  defp reference(l) when is_list(l) do
    head = if length(l) < 16, do: <<0x90 + length(l)>>, else: <<0xDC, length(l)::16>>
    IO.iodata_to_binary([head | Enum.map(l, &reference/1)])
  end

  defp reference(v), do: Msgpack.encode!(v)

  test "maps of every size are written in Enum.map's order" do
    for n <- [0, 1, 15, 16, 31, 32, 33, 64, 200, 1000] do
      m =
        Map.new(1..n//1, fn i ->
          {Enum.at(["k#{i}", i, :"a#{i}", i * 1.5], rem(i, 4)), [i, "v#{i}"]}
        end)

      assert Msgpack.encode!(m) == reference(m), "a map of #{n} keys"
      assert Msgpack.encode!([m, %{"nested" => m}]) == reference([m, %{"nested" => m}])
    end
  end

  test "Larder.Cache's entry is Entry.encode/2's, for every compressor, ttl and stale window" do
    big = Map.new(1..300, &{"field #{&1}", String.duplicate("x", rem(&1, 40))})

    for value <- [1, "text", nil, [1, 2], %{"a" => 1}, big, String.duplicate("p", 5000)],
        compressor <- [:none, :lz4, :snappy, :gzip],
        ttl <- [nil, 0, 60_000],
        stale <- [nil, 0, 5_000] do
      fast = Entry.encode_value(value, compressor, ttl, stale, nil, [])
      {:ok, h} = Header.read(fast)

      assert fast ==
               Entry.encode(value,
                 compressor: compressor,
                 ttl_ms: ttl,
                 stale_ms: stale,
                 created_at: h.created_at
               )

      assert {:ok, %Entry{value: ^value}} = Entry.decode(fast)
    end
  end

  test "the fast entry path refuses what the general one refuses, with the same message" do
    for args <- [
          [1, :nope, nil, 0, nil, []],
          [1, :none, -1, 0, nil, []],
          [self(), :none, nil, 0, nil, []]
        ] do
      assert_raise ArgumentError, fn -> apply(Entry, :encode_value, args) end
    end

    assert_raise ArgumentError, "unknown compressor :nope", fn ->
      Entry.encode_value(1, :nope, nil, 0, nil, [])
    end
  end

  test "LZ4 blocks of repetitive and random data decode to the input" do
    for data <- [
          String.duplicate("<tr><td>row</td></tr>\n", 3000),
          :crypto.strong_rand_bytes(70_000),
          Msgpack.encode!(Map.new(1..1100, &{"k#{&1}", &1}))
        ] do
      packed = Larder.Compressors.compress(:lz4, data)
      assert {:ok, ^data} = Larder.Compressors.decompress(:lz4, packed, 1_048_576)
    end
  end
end
