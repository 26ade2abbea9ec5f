# Keys are checked on exactly the bytes that go on the wire (issue 32, finding 1 and decision (a); spec/STORES.md §2):
# an Elixir key is a binary, written to memcached, Redis, a file name or an SQL parameter byte for byte, so the bytes
# the safe-key rule passed are the bytes the server sees. Every class of hostile key (CR, LF, NUL, space, DEL, raw C1
# bytes, invalid and overlong UTF-8, encoded surrogates, 251 bytes in any encoding, non-binaries) is refused by
# every operation of every store before anything is sent, a sentinel stays untouched and the one pooled connection
# stays in step; the keys the rule accepts (C1 controls and U+010A/U+010D/U+0120 as UTF-8, 250 bytes of multi-byte
# characters) are stored under exactly their bytes, which a raw client of the real server reads back, and smuggle
# no command.
defmodule Larder.HostileKeysTest do
  use ExUnit.Case, async: true

  alias Larder.{Entry, Store, StoreError}
  alias Larder.Stores.Memory

  # The key TypeScript's latin1 encoding turned into `\r\nms GET:http://victim.example/… 0 T0\r\n` (issue 32).
  defp smuggler(target),
    do: "x\u010D\u010Ams\u0120#{target}\u01200\u0120T0\u010D\u010A"

  defp refused(token) do
    [
      {"CR", "k\rk"},
      {"LF", "k\nk"},
      {"CR LF and a command", "k\r\nms #{token} 1 T0\r\nx"},
      {"NUL", "k\0k"},
      {"space", "k k"},
      {"tab", "k\tk"},
      {"DEL", "k\x7Fk"},
      {"a C1 control as a raw byte", <<"k", 0x85, "k">>},
      {"a truncated UTF-8 sequence", <<"k", 0xC4>>},
      {"an overlong LF", <<"k", 0xC0, 0x8A, "k">>},
      {"an encoded unpaired surrogate", <<"k", 0xED, 0xA0, 0x80>>},
      {"a code point past U+10FFFF", <<"k", 0xF4, 0x90, 0x80, 0x80>>},
      {"251 ASCII bytes", String.duplicate("a", 251)},
      {"251 bytes ending in a 2-byte character", String.duplicate("a", 249) <> "é"},
      {"252 bytes of 2-byte characters", String.duplicate("é", 126)},
      {"empty", ""},
      {"a charlist", ~c"abc"},
      {"an atom", :abc},
      {"an integer", 42}
    ]
  end

  defp accepted(token) do
    pad = fn tail, size ->
      token <> String.duplicate("a", size - byte_size(token <> tail)) <> tail
    end

    [
      {"a C1 control as UTF-8 (U+0085)", token <> "k\u0085k"},
      {"U+010A, U+010D, U+0120 carrying a command",
       token <> smuggler("GET:http://victim.example/#{token}")},
      {"U+FFFF", token <> "k\uFFFF"},
      {"a 4-byte character", token <> "k😀"},
      {"250 ASCII bytes", pad.("", 250)},
      {"250 bytes ending in a 2-byte character", pad.("é", 250)},
      {"250 bytes ending in a 4-byte character", pad.("😀", 250)},
      {"250 bytes of 2-byte characters", String.duplicate("é", 125)}
    ]
  end

  defp open(:memcached, _ctx),
    do:
      Larder.Stores.open(
        "memcached://#{Application.fetch_env!(:larder, :test_memcached)}?timeout=5s&pool=1"
      )

  defp open(:redis, _ctx),
    do:
      Larder.Stores.open(
        "redis://#{Application.fetch_env!(:larder, :test_redis)}/0?timeout=5s&pool=1"
      )

  defp open(:file, ctx), do: Larder.Stores.open("file://#{ctx.tmp}/files")
  defp open(:sqlite, ctx), do: Larder.Stores.open("sqlite://#{ctx.tmp}/keys.db")

  defp open(:memory, _ctx) do
    name = :"keys_#{System.unique_integer([:positive])}"
    start_supervised!({Memory, name: name})
    {:ok, Memory.handle(name)}
  end

  setup do
    tmp = Path.join(System.tmp_dir!(), "larder-ex-keys-#{System.unique_integer([:positive])}")
    File.mkdir_p!(tmp)
    on_exit(fn -> File.rm_rf!(tmp) end)
    %{tmp: tmp, token: "hk#{System.unique_integer([:positive])}"}
  end

  # The value at `key`, read by a client of the server's own protocol that writes `key`'s bytes as they are.
  defp raw_get(:memcached, key),
    do: raw(:test_memcached, ["mg ", key, " v\r\n"], &memcached_reply/1)

  defp raw_get(:redis, key),
    do:
      raw(
        :test_redis,
        ["*2\r\n$3\r\nGET\r\n$", Integer.to_string(byte_size(key)), "\r\n", key, "\r\n"],
        &redis_reply/1
      )

  defp raw(server, request, parse) do
    [host, port] = server |> then(&Application.fetch_env!(:larder, &1)) |> String.split(":")

    {:ok, s} =
      :gen_tcp.connect(String.to_charlist(host), String.to_integer(port), [:binary, active: false])

    :ok = :gen_tcp.send(s, request)
    reply = read_reply(s, "", parse)
    :gen_tcp.close(s)
    reply
  end

  defp read_reply(s, acc, parse) do
    case parse.(acc) do
      :more ->
        {:ok, data} = :gen_tcp.recv(s, 0, 5_000)
        read_reply(s, acc <> data, parse)

      done ->
        done
    end
  end

  defp memcached_reply("EN\r\n"), do: :miss

  defp memcached_reply("VA " <> rest = all) do
    with [n, tail] <- :binary.split(rest, "\r\n"),
         size = String.to_integer(n),
         <<value::binary-size(size), "\r\n">> <- tail do
      {:ok, value}
    else
      _ -> if String.length(all) > 100_000, do: {:bad, all}, else: :more
    end
  end

  defp memcached_reply(other),
    do: if(String.contains?(other, "\r\n"), do: {:bad, other}, else: :more)

  defp redis_reply("$-1\r\n"), do: :miss

  defp redis_reply("$" <> rest = all) do
    with [n, tail] <- :binary.split(rest, "\r\n"),
         size = String.to_integer(n),
         <<value::binary-size(size), "\r\n">> <- tail do
      {:ok, value}
    else
      _ -> if byte_size(all) > 100_000, do: {:bad, all}, else: :more
    end
  end

  defp redis_reply(other), do: if(String.contains?(other, "\r\n"), do: {:bad, other}, else: :more)

  # Where the file store keeps `key`, and the key its file records.
  defp file_key(ctx, key) do
    h = Base.encode16(:crypto.hash(:sha256, key), case: :lower)
    path = Path.join([ctx.tmp, "files", binary_part(h, 0, 2), binary_part(h, 2, 2), h])

    case File.read(path) do
      {:ok, <<"LDR1", _::64, len::little-16, stored::binary-size(len), _::binary>>} -> stored
      _ -> nil
    end
  end

  # What the server or the directory holds under `key`: exactly the value, and nothing under the smuggled key.
  defp on_the_server(remote, _ctx, key, value, victim, what)
       when remote in [:memcached, :redis] do
    assert raw_get(remote, key) == {:ok, value}, what
    assert raw_get(remote, victim) == :miss, what
  end

  defp on_the_server(:file, ctx, key, _value, _victim, what),
    do: assert(file_key(ctx, key) == key, what)

  defp on_the_server(_kind, _ctx, _key, _value, _victim, _what), do: :ok

  for kind <- [:memcached, :redis, :file, :sqlite, :memory] do
    describe "#{kind}" do
      test "hostile keys, prefixes and tags are refused by every operation; the sentinel and the connection hold",
           ctx do
        {:ok, s} = open(unquote(kind), ctx)
        sentinel = ctx.token <> "-sentinel"
        assert :ok = Store.set(s, sentinel, "untouched")

        for {what, key} <- refused(ctx.token) do
          results = [
            get: Store.get(s, key),
            get_many: Store.get_many(s, [sentinel, key]),
            set: Store.set(s, key, "v"),
            add: Store.add(s, key, "v"),
            delete: Store.delete(s, key),
            delete_if: Store.delete_if(s, key, "untouched"),
            incr: Store.incr(s, key, 1),
            purge_prefix:
              if(key == "",
                do: {:error, %StoreError{kind: :invalid_key}},
                else: Store.purge_prefix(s, key)
              )
          ]

          for {op, result} <- results do
            assert {:error, %StoreError{kind: :invalid_key}} = result,
                   "#{what}: #{op} gave #{inspect(result)}"
          end

          assert {:ok, "untouched"} = Store.get(s, sentinel), what
        end

        # Tags are hashed into internal keys: any binary is one, and a newline in it reaches no protocol.
        assert {:ok, _} = Store.purge_tag(s, "t\r\nflush_all\r\n#{ctx.token}")
        assert {:error, %StoreError{kind: :invalid_key}} = Store.purge_tag(s, ~c"charlist")

        # The connection is in step: the sentinel, then a fresh round trip, on the one pooled connection.
        assert {:ok, "untouched"} = Store.get(s, sentinel)
        assert :ok = Store.set(s, ctx.token <> "-after", "after")
        assert {:ok, %{} = found} = Store.get_many(s, [sentinel, ctx.token <> "-after"])
        assert found == %{sentinel => "untouched", (ctx.token <> "-after") => "after"}
      end

      test "keys the rule accepts are stored under exactly their bytes and smuggle nothing",
           ctx do
        {:ok, s} = open(unquote(kind), ctx)
        sentinel = ctx.token <> "-sentinel"
        assert :ok = Store.set(s, sentinel, "untouched")
        victim = "GET:http://victim.example/#{ctx.token}"

        for {what, key} <- accepted(ctx.token) do
          value = "value of " <> what
          assert :ok = Store.set(s, key, value), what
          assert {:ok, ^value} = Store.get(s, key)
          assert {:ok, %{^key => ^value}} = Store.get_many(s, [key])

          on_the_server(unquote(kind), ctx, key, value, victim, what)

          assert {:ok, true} = Store.delete(s, key)
          assert :miss = Store.get(s, key)
          assert {:ok, _} = Store.purge_prefix(s, key)
        end

        assert :miss = Store.get(s, victim)
        assert {:ok, "untouched"} = Store.get(s, sentinel)
      end

      test "a purge prefix is matched on its bytes, combining characters included", ctx do
        {:ok, s} = open(unquote(kind), ctx)
        old = Store.now_ms() - 5_000
        # "e" then U+0301: one grapheme, two characters, three bytes.
        prefix = ctx.token <> "e\u0301"
        assert :ok = Store.set(s, prefix <> "x", Entry.encode(1, created_at: old))
        assert :ok = Store.set(s, ctx.token <> "ex", Entry.encode(2, created_at: old))
        assert {:ok, _} = Store.purge_prefix(s, prefix)
        assert :miss = Store.get(s, prefix <> "x")
        assert {:ok, _} = Store.get(s, ctx.token <> "ex")
      end
    end
  end

  test "a URL's prefix option that is not UTF-8 is refused by every store; a UTF-8 one goes on the wire as is",
       ctx do
    urls = fn query ->
      [
        "memcached://#{Application.fetch_env!(:larder, :test_memcached)}?#{query}",
        "redis://#{Application.fetch_env!(:larder, :test_redis)}/0?#{query}",
        "file://#{ctx.tmp}/prefixed?#{query}",
        "sqlite://#{ctx.tmp}/prefixed.db?#{query}"
      ]
    end

    for bad <- ["%FF", "%C0%AF", "a%ED%A0%80"], url <- urls.("prefix=" <> bad) do
      assert {:error, %StoreError{kind: :url, message: message}} = Larder.Stores.open(url)
      assert message =~ "prefix", url
    end

    # "é:" then the key: the stored key is exactly those bytes, read back raw.
    [memcached, redis | _] = urls.("prefix=#{ctx.token}%C3%A9:")
    key = ctx.token <> "é:k"

    for {url, kind} <- [{memcached, :memcached}, {redis, :redis}] do
      {:ok, s} = Larder.Stores.open(url)
      assert :ok = Store.set(s, "k", "v")
      assert raw_get(kind, key) == {:ok, "v"}
    end
  end
end
