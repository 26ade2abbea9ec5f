# Whole replies are bounded, for every command, not only gets (issue 32, finding 4 and decision (d); spec/STORES.md
# §2): a server that answers a script, a scan, a multi-get, a write or a delete with a reply whose parts each pass
# their own bound (values within max_value, arrays within their element count) but add up to gigabytes is refused
# as soon as the reply passes what its command can return: at once, long before the 30 s timeout, with a malformed
# error, and the BEAM's memory (:erlang.memory, sampled every millisecond) grows by far less than the reply. The fake
# servers are in the test, answering each command with a script of replies built from one shared 64 MiB binary, and
# send at most eight such values before waiting (so the code before the fix, which read them, stays within a
# gigabyte when run against these tests).
defmodule Larder.ReplyBoundsTest do
  # Not async: these tests measure the whole VM's memory.
  use ExUnit.Case, async: false

  alias Larder.{Entry, Store, StoreError}

  @mib 1024 * 1024
  @big 64 * @mib
  @sent_at_most 8

  setup_all do
    # Allocated once, before any baseline: every value the servers send is this binary.
    %{chunk: :binary.copy("x", @big)}
  end

  # A server answering each request with `answer.(command_name)` (iodata chunks, sent until the client hangs up).
  defp serve(protocol, answer) do
    {:ok, listen} =
      :gen_tcp.listen(0, [:binary, active: false, ip: {127, 0, 0, 1}, reuseaddr: true])

    {:ok, port} = :inet.port(listen)
    server = spawn(fn -> accept(listen, protocol, answer) end)
    on_exit(fn -> Process.exit(server, :kill) && :gen_tcp.close(listen) end)
    port
  end

  defp accept(listen, protocol, answer) do
    case :gen_tcp.accept(listen) do
      {:ok, s} ->
        handler = spawn(fn -> handle(s, protocol, answer) end)
        :gen_tcp.controlling_process(s, handler)
        send(handler, :go)
        accept(listen, protocol, answer)

      _ ->
        :ok
    end
  end

  defp handle(s, protocol, answer) do
    receive do
      :go -> :ok
    end

    loop(s, protocol, answer)
  end

  defp loop(s, protocol, answer) do
    case :gen_tcp.recv(s, 0, 60_000) do
      {:ok, request} ->
        sent =
          Enum.reduce_while(answer.(name(protocol, request)), :ok, fn chunk, :ok ->
            case :gen_tcp.send(s, chunk) do
              :ok -> {:cont, :ok}
              e -> {:halt, e}
            end
          end)

        if sent == :ok, do: loop(s, protocol, answer), else: :gen_tcp.close(s)

      _ ->
        :gen_tcp.close(s)
    end
  end

  defp name(:redis, request) do
    case Regex.run(~r/\A\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n/, request) do
      [_, name] -> String.upcase(name)
      _ -> "?"
    end
  end

  defp name(:memcached, request), do: request |> :binary.split([" ", "\r\n"]) |> hd()

  # `head`, then `count` values of 64 MiB as RESP bulk strings, of which at most eight are sent; then the server
  # waits (an endless reply the client must stop reading by itself).
  defp bulks(head, count, chunk) do
    Stream.concat([
      [head],
      Stream.repeatedly(fn -> ["$#{@big}\r\n", chunk, "\r\n"] end)
      |> Stream.take(min(count, @sent_at_most)),
      Stream.repeatedly(fn -> Process.sleep(60_000) && "" end)
    ])
  end

  # Runs `op`, sampling the VM's memory: `{result, milliseconds, peak growth in bytes}`.
  defp measured(op) do
    :erlang.garbage_collect()
    base = :erlang.memory(:total)
    parent = self()
    sampler = spawn_link(fn -> sample(parent, base) end)
    {micros, result} = :timer.tc(op)
    send(sampler, :stop)

    receive do
      {:peak, peak} -> {result, div(micros, 1000), peak - base}
    end
  end

  defp sample(parent, peak) do
    receive do
      :stop -> send(parent, {:peak, max(peak, :erlang.memory(:total))})
    after
      1 -> sample(parent, max(peak, :erlang.memory(:total)))
    end
  end

  defp refused_at_once({result, ms, growth}, what, max_growth) do
    assert {:error, %StoreError{kind: :malformed}} = result, "#{what}: #{inspect(result)}"
    assert ms < 10_000, "#{what}: refused after #{ms} ms, not at once (the timeout is 30 s)"

    assert growth < max_growth,
           "#{what}: memory grew by #{div(growth, @mib)} MiB (at most #{div(max_growth, @mib)})"
  end

  # Redis: each command's reply shape, past its bound but within the per-value and per-array checks of before.
  test "redis: scripts, multi-gets, scans, writes and deletes answered with gigabytes are refused at once",
       ctx do
    c = ctx.chunk

    cases = [
      {"incr (incr.lua): 1,000 values of 64 MiB", "EVALSHA", bulks("*1000\r\n", 1000, c),
       &Store.incr(&1, "n", 1)},
      {"incr (incr.lua): an array of 8 values of 64 MiB", "EVALSHA", bulks("*8\r\n", 8, c),
       &Store.incr(&1, "n", 1)},
      {"delete_if (delete_if.lua): one value of 64 MiB", "EVALSHA", bulks("", 1, c),
       &Store.delete_if(&1, "k", "token")},
      {"add (SET NX): one value of 64 MiB", "SET", bulks("", 1, c), &Store.add(&1, "k", "v")},
      {"delete (DEL): one value of 64 MiB", "DEL", bulks("", 1, c), &Store.delete(&1, "k")},
      {"clear (FLUSHDB): 1,000 values of 64 MiB", "FLUSHDB", bulks("*1000\r\n", 1000, c),
       &Store.clear/1},
      {"get_many (MGET) of 2 keys: arrays of 64 MiB values where the values go", "MGET",
       bulks("*2\r\n*2\r\n", 2, c), &Store.get_many(&1, ["a", "b"])}
    ]

    for {what, command, reply, op} <- cases do
      port = serve(:redis, fn name -> if name == command, do: reply, else: ["+OK\r\n"] end)
      {:ok, s} = Larder.Stores.open("redis://127.0.0.1:#{port}?timeout=30s&failures=1000")

      # The bound of these replies is 16 KiB (a status or an integer); the VM moves by more than that on its own.
      refused_at_once(measured(fn -> op.(s) end), what, 8 * @mib)
    end
  end

  test "redis: a scan answered with 1,000 values of 64 MiB is refused at the second, whose bytes pass the reply's",
       ctx do
    reply = bulks("*2\r\n$1\r\n0\r\n*1000\r\n", 1000, ctx.chunk)

    for {what, command, op} <- [
          {"purge_prefix (SCAN)", "SCAN", &Store.purge_prefix(&1, "p")},
          {"purge_tag (SSCAN)", "SSCAN", &Store.purge_tag(&1, "t")}
        ] do
      port = serve(:redis, fn name -> if name == command, do: reply, else: [":0\r\n"] end)
      {:ok, s} = Larder.Stores.open("redis://127.0.0.1:#{port}?timeout=30s&failures=1000")

      # A scan's reply may hold one key of max_value (Redis allows it), read whole before the second is refused:
      # the BEAM's growing receive buffer takes up to about twice a value while it reads one.
      refused_at_once(measured(fn -> op.(s) end), what, 2 * (@big + @mib))
    end
  end

  test "redis: a set whose tag script is answered with gigabytes does not read them, and fails",
       ctx do
    reply = bulks("*8\r\n", 8, ctx.chunk)
    port = serve(:redis, fn name -> if name == "EVALSHA", do: reply, else: ["+OK\r\n"] end)
    {:ok, s} = Larder.Stores.open("redis://127.0.0.1:#{port}?timeout=30s&failures=1000")

    {result, ms, growth} = measured(fn -> Store.set(s, "k", Entry.encode(1, tags: ["t"])) end)

    # The entry could not join its tag's set, so a purge of the tag would miss it: the write is an error.
    assert {:error, %StoreError{kind: :malformed}} = result
    assert ms < 10_000
    assert growth < 8 * @mib, "memory grew by #{div(growth, @mib)} MiB"
  end

  # memcached: one reply per request, each a line or a line and a value within max_item; anything else is refused.
  test "memcached: every command answered past its reply's bound is refused at once" do
    item = @mib
    value = fn n -> ["VA #{n}\r\n", :binary.copy("x", n), "\r\n"] end

    cases = [
      {"get: a value past max_item", "mg", value.(item + 1), &Store.get(&1, "k")},
      {"set (ms): a value where a status goes", "ms", value.(item), &Store.set(&1, "k", "v")},
      {"add (ms ME): a value where a status goes", "ms", value.(item), &Store.add(&1, "k", "v")},
      {"delete (md): a value where a status goes", "md", value.(item), &Store.delete(&1, "k")},
      {"incr (ma): a number of 41 digits", "ma", value.(41), &Store.incr(&1, "n", 1)},
      {"delete_if (mg … c): a value past max_item", "mg", value.(item + 1),
       &Store.delete_if(&1, "k", "token")},
      {"purge_tag (ms): a value where a status goes", "ms", value.(item),
       &Store.purge_tag(&1, "t")},
      {"purge_prefix (mg … c): a value past max_item", "mg", value.(item + 1),
       &Store.purge_prefix(&1, "p")},
      {"clear (flush_all): a value where OK goes", "flush_all", value.(item), &Store.clear/1}
    ]

    for {what, command, reply, op} <- cases do
      port = serve(:memcached, fn name -> if name == command, do: reply, else: ["EN\r\n"] end)

      {:ok, s} =
        Larder.Stores.open("memcached://127.0.0.1:#{port}?timeout=30s&failures=1000&max_item=1M")

      refused_at_once(measured(fn -> op.(s) end), what, 8 * @mib)
    end
  end

  test "memcached: a get answered with more values than it asked for is malformed, not read as the next key's" do
    # Each value within max_item, the whole batch within its bytes: only the count of replies is wrong. Before `mn`
    # ended the batch, the first two were read as the key's value and the prefix list, and the rest left unread.
    port = serve(:memcached, fn _ -> [List.duplicate("VA 3\r\nxxx\r\n", 10), "MN\r\n"] end)

    {:ok, s} = Larder.Stores.open("memcached://127.0.0.1:#{port}?timeout=30s&failures=1000")

    for {what, op} <- [get: &Store.get(&1, "k"), get_many: &Store.get_many(&1, ["k1", "k2"])] do
      {micros, result} = :timer.tc(fn -> op.(s) end)
      assert {:error, %StoreError{kind: :malformed}} = result, "#{what}: #{inspect(result)}"
      assert micros < 5_000_000, "#{what}: not at once"
    end

    # A server that answers as asked is read as before.
    port = serve(:memcached, fn _ -> ["VA 3\r\nabc\r\nEN\r\nMN\r\n"] end)
    {:ok, s} = Larder.Stores.open("memcached://127.0.0.1:#{port}?timeout=30s")
    assert {:ok, "abc"} = Store.get(s, "k")
  end
end
