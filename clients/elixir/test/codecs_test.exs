# The compressors round-trip what they write, and every decoder of untrusted bytes (entries, MessagePack, JSON,
# LZ4, Snappy, gzip) answers random and mutated input with a value or a typed error: never an exception, never
# more than max_size. Inputs come from :rand, which ExUnit seeds per test (re-run with --seed to reproduce).
defmodule Larder.CodecsTest do
  use ExUnit.Case, async: true
  import Bitwise

  alias Larder.{Compressors, Entry, JSON, Msgpack}

  defp bytes(n), do: for(_ <- 1..n//1, into: "", do: <<:rand.uniform(256) - 1>>)

  # Text with repeats, the shape of cached pages.
  defp texty(n) do
    words = ["<div>", "larder", " ", "cache", "</div>\n", "é", "🙂", "0123456789"]
    Stream.repeatedly(fn -> Enum.random(words) end) |> Enum.take(n) |> Enum.join()
  end

  defp sample do
    case :rand.uniform(4) do
      1 -> bytes(:rand.uniform(3000) - 1)
      2 -> texty(:rand.uniform(2000))
      3 -> :binary.copy(bytes(:rand.uniform(8)), :rand.uniform(5000))
      4 -> texty(:rand.uniform(50)) <> bytes(:rand.uniform(100))
    end
  end

  for codec <- [:lz4, :snappy, :gzip, :zstd, :brotli] do
    test "#{codec} round-trips random and repetitive data" do
      for _ <- 1..300 do
        data = sample()
        packed = Compressors.compress(unquote(codec), data)
        assert {:ok, ^data} = Compressors.decompress(unquote(codec), packed, byte_size(data))

        if byte_size(data) > 0,
          do:
            assert(
              {:error, {:too_large, _}} =
                Compressors.decompress(unquote(codec), packed, byte_size(data) - 1)
            )
      end
    end

    test "#{codec} answers mutated and random input with a typed error" do
      for _ <- 1..400 do
        data = sample()
        packed = Compressors.compress(unquote(codec), data)
        input = if :rand.uniform(2) == 1, do: mutate(packed), else: bytes(:rand.uniform(64))

        case Compressors.decompress(unquote(codec), input, 100_000) do
          {:ok, out} -> assert byte_size(out) <= 100_000
          {:error, {kind, _}} -> assert kind in [:corrupt_payload, :too_large]
        end
      end
    end
  end

  test "LZ4 compresses repetitive text and keeps the format's end rules (checked by decoding every length)" do
    for n <- 0..80 do
      data = :binary.copy("ab", n)
      assert {:ok, ^data} = Compressors.decompress(:lz4, Compressors.compress(:lz4, data), 1000)
    end

    page = texty(5000)
    assert byte_size(Compressors.compress(:lz4, page)) < byte_size(page) / 2
  end

  test "zstd and brotli go through the codec program (built by mix compile, as test.sh ensures)" do
    assert Larder.Codecs.Native.available?()

    for c <- [:zstd, :brotli] do
      entry = <<0xC1, 0x4C, 1, 0, 1, if(c == :zstd, do: 3, else: 4), 0, 0::64, 0::64, "whatever">>
      assert {:error, {:corrupt_payload, _}} = Entry.decode(entry)
      page = texty(3000)

      assert {:ok, %Entry{compressor: ^c, value: ^page}} =
               Entry.decode(Entry.encode(page, compressor: c))
    end
  end

  test "zstd and brotli bombs stop at max_size" do
    zeros = :binary.copy(<<0>>, 2_000_000)

    for c <- [:zstd, :brotli] do
      packed = Compressors.compress(c, zeros)
      assert byte_size(packed) < 10_000
      assert {:error, {:too_large, _}} = Compressors.decompress(c, packed, 100_000)
    end
  end

  test "entries: random bytes and mutations of valid entries decode or fail with a kind of FORMAT.md §7" do
    kinds = Larder.Error.kinds()

    for _ <- 1..1500 do
      valid =
        Entry.encode(random_value(3),
          compressor: Enum.random([:none, :lz4, :snappy, :gzip]),
          threshold: Enum.random([0, 1024]),
          version: Enum.random([nil, "v1"]),
          tags: Enum.random([[], ["a", "b"]]),
          stale_ms: Enum.random([0, 5])
        )

      input =
        if :rand.uniform(3) == 1,
          do: <<0xC1, 0x4C, 1>> <> bytes(:rand.uniform(60)),
          else: mutate(valid)

      case Entry.decode(input, max_size: 50_000) do
        {:ok, %Entry{}} -> :ok
        {:error, {kind, _}} -> assert kind in kinds
      end
    end
  end

  test "MessagePack: what it writes reads back; random bytes fail as bad_value" do
    for _ <- 1..500 do
      v = random_value(4)
      assert {:ok, back} = Msgpack.decode(Msgpack.encode!(v))
      assert back == normalise(v)
      junk = bytes(20)

      assert match?({:ok, _}, Msgpack.decode(junk)) or
               match?({:error, {:bad_value, _}}, Msgpack.decode(junk))
    end
  end

  test "MessagePack: claims larger than the input are refused before anything is built" do
    assert {:error, {:bad_value, _}} = Msgpack.decode(<<0xDD, 0xFF, 0xFF, 0xFF, 0xFF>>)
    assert {:error, {:bad_value, _}} = Msgpack.decode(<<0xDF, 0xFF, 0xFF, 0xFF, 0xFF, 1>>)
    assert {:error, {:bad_value, _}} = Msgpack.decode(<<0xDB, 0xFF, 0xFF, 0xFF, 0xFF>>)
    deep = :binary.copy(<<0x91>>, 5000) <> <<0xC0>>
    assert {:error, {:bad_value, _}} = Msgpack.decode(deep)
  end

  test "MessagePack writes canonical bytes (smallest ints, float64, str, bin, ordered maps)" do
    assert Msgpack.encode!(0) == <<0>>
    assert Msgpack.encode!(-32) == <<0xE0>>
    assert Msgpack.encode!(-33) == <<0xD0, -33::signed-8>>
    assert Msgpack.encode!(255) == <<0xCC, 255>>
    assert Msgpack.encode!(1 <<< 40) == <<0xCF, 1 <<< 40::64>>
    assert Msgpack.encode!(1.5) == <<0xCB, 1.5::float-64>>
    assert Msgpack.encode!(%Larder.Bin{data: "a"}) == <<0xC4, 1, ?a>>

    assert Msgpack.encode!(%Larder.Ordered{pairs: [{"b", 1}, {"a", 2}]}) ==
             <<0x82, 0xA1, ?b, 1, 0xA1, ?a, 2>>

    assert_raise ArgumentError, fn -> Msgpack.encode!(1 <<< 64) end
    assert_raise ArgumentError, fn -> Msgpack.encode!(-(1 <<< 63) - 1) end
    deep = Enum.reduce(1..101, 1, fn _, acc -> [acc] end)
    assert_raise ArgumentError, fn -> Msgpack.encode!(deep) end
  end

  test "JSON reads what it writes and refuses what RFC 8259 refuses" do
    for _ <- 1..300 do
      v = random_value(4)
      assert JSON.decode(JSON.encode!(v)) == {:ok, normalise(v)}
    end

    for bad <- [
          "",
          "01",
          "1.",
          "[1,]",
          "{\"a\":1,}",
          "\"\\ud800\"",
          "nul",
          "[1] x",
          "\"\u0001\"",
          "1e",
          "-"
        ] do
      assert {:error, _} = JSON.decode(bad), bad
    end

    assert {:ok, %Larder.Ordered{pairs: [{"b", 1}, {"a", 2}, {"b", 3}]}} =
             JSON.decode(~s({"b":1,"a":2,"b":3}), objects: :ordered)

    assert JSON.decode("1e400") == {:ok, :infinity}
    assert JSON.decode(~s("\\ud83d\\ude42")) == {:ok, "🙂"}
  end

  defp random_value(0), do: random_scalar()

  defp random_value(depth) do
    case :rand.uniform(6) do
      1 -> for _ <- 1..:rand.uniform(4)//1, do: random_value(depth - 1)
      2 -> Map.new(1..:rand.uniform(4)//1, fn i -> {"k#{i}", random_value(depth - 1)} end)
      _ -> random_scalar()
    end
  end

  defp random_scalar do
    case :rand.uniform(7) do
      1 -> nil
      2 -> :rand.uniform(2) == 1
      3 -> :rand.uniform(1 <<< 40) - (1 <<< 39)
      4 -> :rand.uniform() * 1.0e6
      5 -> texty(:rand.uniform(10))
      6 -> Enum.random([0, -1, 127, 128, 65_535, 1 <<< 63, -(1 <<< 63)])
      7 -> ""
    end
  end

  defp normalise(v), do: v

  defp mutate(<<>>), do: <<0>>

  defp mutate(data) do
    case :rand.uniform(3) do
      1 ->
        i = :rand.uniform(byte_size(data)) - 1
        <<a::binary-size(i), _, b::binary>> = data
        <<a::binary, :rand.uniform(256) - 1, b::binary>>

      2 ->
        binary_part(data, 0, :rand.uniform(byte_size(data)) - 1)

      3 ->
        data <> bytes(:rand.uniform(4))
    end
  end
end
