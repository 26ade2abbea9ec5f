# Entries crossing between Elixir and the Python and Ruby clients through memcached, Redis, files and SQLite (the Rust
# binary is in remote_stores_test.exs): each language writes an entry (LZ4-compressed and tagged, so compression and header
# fields cross too), the other reads and decodes it, and a value purged by tag in one is gone for the other.
# Uses the repository's .venv (make test builds it) and Debian's ruby with ruby-msgpack; a missing one is a failure.
defmodule Larder.CrossLanguageTest do
  use ExUnit.Case, async: true

  alias Larder.{Entry, Store}

  @root Path.expand("../../..", __DIR__)
  @python Path.join(@root, ".venv/bin/python")

  @python_script """
  import json, sys
  from larder import decode, encode, open_store
  url, op, key = sys.argv[1:4]
  store = open_store(url)
  if op == "get":
      raw = store.get(key)
      entry = decode(raw)
      print(json.dumps({"value": entry.value, "tags": list(entry.tags), "compressor": entry.compressor}))
  elif op == "set":
      store.set(key, encode({"from": "python", "page": "p" * 3000}, tags=["shared"], ttl_ms=60000))
  elif op == "purge":
      store.purge_tag("shared")
  """

  @ruby_script """
  require "json"
  require "larder"
  url, op, key = ARGV
  store = Larder::Stores.open(url)
  case op
  when "get"
    entry = Larder.decode(store.get(key))
    puts JSON.generate({ "value" => entry.value, "tags" => entry.tags, "compressor" => entry.compressor })
  when "set"
    store.set(key, Larder.encode({ "from" => "ruby", "page" => "r" * 3000 }, tags: ["shared"], ttl_ms: 60_000))
  when "purge"
    store.purge_tag("shared")
  end
  """

  # The other language's stdout only: what its interpreter or libraries warn about on stderr (their versions' business)
  # shows in the test's output, and is never read as the answer.
  defp run(:python, args) do
    unless File.exists?(@python),
      do: flunk("#{@python} is missing: run make venv at the repository root")

    System.cmd(@python, ["-c", @python_script | args],
      env: [{"PYTHONPATH", Path.join(@root, "clients/python/src")}]
    )
  end

  defp run(:ruby, args) do
    ruby = System.find_executable("ruby") || flunk("ruby is missing: make ruby-packages")

    System.cmd(ruby, ["-I", Path.join(@root, "clients/ruby/lib"), "-e", @ruby_script | args])
  end

  defp url(:memcached, prefix),
    do:
      "memcached://#{Application.fetch_env!(:larder, :test_memcached)}?prefix=#{prefix}&timeout=2s"

  defp url(:file, prefix),
    do:
      "file://#{Path.join(System.tmp_dir!(), "larder-ex-cross-#{System.pid()}")}?prefix=#{prefix}"

  defp url(:redis, prefix),
    do: "redis://#{Application.fetch_env!(:larder, :test_redis)}/0?prefix=#{prefix}&timeout=2s"

  defp url(:sqlite, prefix),
    do:
      "sqlite://#{Path.join(System.tmp_dir!(), "larder-ex-cross-#{System.pid()}.db")}?prefix=#{prefix}"

  for store <- [:memcached, :redis, :file, :sqlite], lang <- [:python, :ruby] do
    test "#{lang} and Elixir over #{store}" do
      prefix = "x#{System.unique_integer([:positive])}:"
      u = url(unquote(store), prefix)
      {:ok, s} = Larder.Stores.open(u)

      page = String.duplicate("e", 3000)

      entry =
        Entry.encode(%{"from" => "elixir", "page" => page, "n" => [1, 2.5, nil, true]},
          tags: ["shared"],
          created_at: Store.now_ms() - 3000
        )

      assert :ok = Store.set(s, "from-elixir", entry)
      {out, 0} = run(unquote(lang), [u, "get", "from-elixir"])
      got = Larder.JSON.decode!(String.trim(out))
      assert got["value"] == %{"from" => "elixir", "page" => page, "n" => [1, 2.5, nil, true]}
      assert got["tags"] == ["shared"]
      assert got["compressor"] == "lz4"

      {out, 0} = run(unquote(lang), [u, "set", "from-other"])
      assert out == ""
      assert {:ok, raw} = Store.get(s, "from-other")

      assert {:ok,
              %Entry{
                value: %{"from" => from, "page" => other_page},
                tags: ["shared"],
                compressor: :lz4
              }} = Entry.decode(raw)

      assert from == Atom.to_string(unquote(lang))
      assert byte_size(other_page) == 3000

      # A purge by tag from the other language hides Elixir's entry (and its own).
      {_, 0} = run(unquote(lang), [u, "purge", "-"])
      assert :miss = Store.get(s, "from-elixir")
    end
  end
end
