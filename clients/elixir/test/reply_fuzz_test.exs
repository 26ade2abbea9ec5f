# The memcached and Redis reply readers face whatever a server sends: a loopback server answers every request with
# a valid reply, a mutated one (a byte changed, cut short, bytes added) or random bytes, from :rand (ExUnit seeds
# it; --seed reproduces). Every read ends with a value, a miss or the store's error, within the timeout, and the
# caller never sees an exception.
defmodule Larder.ReplyFuzzTest do
  use ExUnit.Case, async: false

  alias Larder.{Store, StoreError}

  @memcached_replies [
    "EN\r\n",
    "VA 3 \r\nabc\r\n",
    "VA 0\r\n\r\n",
    "VA 5 c12\r\nhello\r\n",
    "HD\r\n",
    "NS\r\n"
  ]
  @redis_replies [
    "$3\r\nabc\r\n",
    "$-1\r\n",
    "*2\r\n$1\r\na\r\n$-1\r\n",
    "+OK\r\n",
    ":1\r\n",
    "-ERR no\r\n",
    "*-1\r\n"
  ]

  defp reply(valid) do
    base = Enum.random(valid) <> if(:rand.uniform(2) == 1, do: Enum.random(valid), else: "")

    case :rand.uniform(5) do
      1 -> base
      2 -> binary_part(base, 0, :rand.uniform(byte_size(base)) - 1)
      3 -> flip(base)
      4 -> base <> for(_ <- 1..:rand.uniform(20), into: "", do: <<:rand.uniform(256) - 1>>)
      5 -> for _ <- 1..:rand.uniform(40), into: "", do: <<:rand.uniform(256) - 1>>
    end
  end

  defp flip(b) do
    i = :rand.uniform(byte_size(b)) - 1
    <<a::binary-size(i), _, rest::binary>> = b
    <<a::binary, :rand.uniform(256) - 1, rest::binary>>
  end

  # Serves each connection with the replies `parent` hands out, one per request read.
  defp serve(valid) do
    {:ok, listen} =
      :gen_tcp.listen(0, [:binary, active: false, ip: {127, 0, 0, 1}, reuseaddr: true])

    {:ok, port} = :inet.port(listen)
    seed = :rand.export_seed()
    server = spawn_link(fn -> :rand.seed(seed) && accept(listen, valid) end)
    {server, port}
  end

  defp accept(listen, valid) do
    case :gen_tcp.accept(listen) do
      {:ok, s} ->
        spawn(fn -> answer(s, valid) end) |> then(&:gen_tcp.controlling_process(s, &1))
        accept(listen, valid)

      _ ->
        :ok
    end
  end

  defp answer(s, valid) do
    receive do
    after
      5 -> :ok
    end

    case :gen_tcp.recv(s, 0, 2000) do
      {:ok, _} ->
        :gen_tcp.send(s, reply(valid))
        if :rand.uniform(4) == 1, do: :gen_tcp.close(s), else: answer(s, valid)

      _ ->
        :gen_tcp.close(s)
    end
  end

  for {scheme, valid} <- [{"memcached", @memcached_replies}, {"redis", @redis_replies}] do
    test "#{scheme} replies, valid, mutated and random" do
      {server, port} = serve(unquote(valid))
      # failures=1000: the server is never ejected, so every request reaches the reader.
      extra = if unquote(scheme) == "memcached", do: "&prefix_purge=false", else: ""

      {:ok, s} =
        Larder.Stores.open(
          "#{unquote(scheme)}://127.0.0.1:#{port}?timeout=100ms&failures=1000#{extra}"
        )

      for i <- 1..150 do
        op =
          Enum.random([
            fn -> Store.get(s, "k#{i}") end,
            fn -> Store.get_many(s, ["a", "b", "c"]) end,
            fn -> Store.set(s, "k", "v") end,
            fn -> Store.add(s, "k", "v") end,
            fn -> Store.delete(s, "k") end,
            fn -> Store.incr(s, "n", 1) end
          ])

        {micros, result} = :timer.tc(op)

        assert match?({:ok, _}, result) or result in [:ok, :miss, :missing] or
                 match?({:error, %StoreError{}}, result),
               inspect(result)

        # No hang: hostile_test.exs holds the deadline itself; this bound leaves room for a loaded machine and a
        # script's EVALSHA then EVAL (two requests).
        assert micros < 3_000_000
      end

      Process.unlink(server)
      Process.exit(server, :kill)
    end
  end
end
