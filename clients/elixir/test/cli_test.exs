# The format commands of spec/CLI.md against the Rust reference binary (LARDER_BIN, default target/debug/larder):
# the same inputs through both, stdout and exit status compared byte for byte (stderr's first words for errors,
# whose details differ between languages). A missing binary is a failure that says how to build it.
defmodule Larder.CLITest do
  use ExUnit.Case, async: false

  @root Path.expand("../../..", __DIR__)
  @vectors Path.join(@root, "spec/vectors")

  setup_all do
    bin = System.get_env("LARDER_BIN") || Path.join(@root, "target/debug/larder")

    unless File.exists?(bin),
      do:
        flunk(
          "#{bin} is missing: cargo build -p larder-cli (or run make test at the repository root)"
        )

    dir = Path.join(System.tmp_dir!(), "larder-ex-cli-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{bin: bin, dir: dir}
  end

  defp elixir(args, stdin \\ "", env \\ %{}) do
    old = Map.new(env, fn {k, _} -> {k, System.get_env(k)} end)
    Enum.each(env, fn {k, v} -> System.put_env(k, v) end)

    try do
      {status, out, err} = Larder.CLI.run(args, fn -> stdin end)
      {out, status, err}
    after
      Enum.each(old, fn {k, v} -> if v, do: System.put_env(k, v), else: System.delete_env(k) end)
    end
  end

  defp rust(ctx, args, stdin, env \\ %{}) do
    input = Path.join(ctx.dir, "stdin-#{System.unique_integer([:positive])}")
    File.write!(input, stdin)
    errfile = input <> ".err"
    quoted = Enum.map_join([ctx.bin | args], " ", &sh_quote/1)
    env = Enum.to_list(Map.put_new(env, "LARDER_FORCE_TTY", "0"))

    {out, status} =
      System.cmd("sh", ["-c", "#{quoted} < #{sh_quote(input)} 2> #{sh_quote(errfile)}"], env: env)

    {out, status, File.read!(errfile)}
  end

  defp sh_quote(s), do: "'" <> String.replace(s, "'", "'\\''") <> "'"

  defp same(ctx, args, stdin \\ "", env \\ %{}) do
    env = Map.put_new(env, "LARDER_FORCE_TTY", "0")
    {rout, rstatus, rerr} = rust(ctx, args, stdin, env)
    {eout, estatus, eerr} = elixir(args, stdin, env)

    assert {estatus, eout} == {rstatus, rout},
           "#{inspect(args)}: rust said #{inspect(rerr)}, elixir #{inspect(eerr)}"

    assert error_kind(eerr) == error_kind(rerr), "#{inspect(args)}: #{rerr} vs #{eerr}"
    {eout, estatus}
  end

  # "larder: invalid entry: bad_magic: …" -> "larder: invalid entry: bad_magic"; other messages: their first word.
  defp error_kind(""), do: ""

  defp error_kind(err) do
    case Regex.run(~r/^larder: invalid entry: (\w+)/, err) do
      [m, _] -> m
      nil -> err |> String.split(" ") |> hd()
    end
  end

  test "inspect prints every valid vector entry as the Rust binary does, in every form", ctx do
    doc = Larder.JSON.decode!(File.read!(Path.join(@vectors, "entries.json")))

    for v <- doc["cases"] do
      entry = Base.decode16!(v["entry_hex"], case: :lower)
      same(ctx, ["inspect"], entry)
      same(ctx, ["inspect", "--json"], entry)
      same(ctx, ["inspect", "--body"], entry)
      same(ctx, ["inspect", "--body"], entry, %{"LARDER_FORCE_TTY" => "1"})
    end
  end

  test "inspect refuses every invalid vector with the same exit status and error kind", ctx do
    doc = Larder.JSON.decode!(File.read!(Path.join(@vectors, "invalid.json")))

    for v <- doc["cases"] do
      args =
        if v["max_size"], do: ["inspect", "--max-size", "#{v["max_size"]}"], else: ["inspect"]

      assert {"", 1} = same(ctx, args, Base.decode16!(v["entry_hex"], case: :lower))
    end
  end

  test "entries the Elixir encoder writes are read alike by both, and equal the Rust encoder's when uncompressed",
       ctx do
    docs = [
      ~s({"id":7,"name":"Ada","tags":["x","y"],"n":null,"t":true,"f":1.5,"big":18446744073709551615,"neg":-9223372036854775808}),
      ~s({"b":1,"a":{"z":[1,2,{"q":"é🙂\\u0001"}],"a":-0,"f":1e300,"g":0.0001,"h":1e-7}}),
      ~s([1,2,3]),
      ~s("a string with \\"quotes\\" and \\\\ backslash\\n"),
      ~s({"dup":1,"x":2,"dup":3}),
      Larder.JSON.encode!(%{"page" => String.duplicate("<p>larder</p>", 400)})
    ]

    opts = [
      [
        "--created-at",
        "1700000000000",
        "--ttl",
        "60",
        "--version",
        "v1",
        "--tag",
        "user:7",
        "--tag",
        "t2"
      ],
      ["--created-at", "5", "--compressor", "none", "--stale", "30"],
      ["--created-at", "5", "--compressor", "snappy", "--threshold", "0"],
      ["--created-at", "5", "--compressor", "gzip", "--serializer", "json"],
      ["--created-at", "5", "--compressor", "zstd", "--level", "19"],
      ["--created-at", "5", "--compressor", "brotli", "--threshold", "10"]
    ]

    for doc <- docs, o <- opts do
      {entry, 0} = same_encode(ctx, ["encode" | o], doc)
      same(ctx, ["inspect"], entry)
      same(ctx, ["inspect", "--json", "--body"], entry)
    end

    for {input, ser} <- [
          {"hi\n", "text"},
          {<<0, 255, 1>>, "raw"},
          {"", "text"},
          {<<0xFF>>, "text"}
        ] do
      same(ctx, ["encode", "--serializer", ser, "--created-at", "1"], input)
    end

    response =
      ~s({"status":301,"headers":[["location","https://x.example/"],["x-b",{"$base64":"/w=="}]],"body":"moved"})

    {entry, 0} = same_encode(ctx, ["encode", "--kind", "response", "--created-at", "9"], response)
    same(ctx, ["inspect"], entry)
    same(ctx, ["inspect", "--json"], entry)
  end

  # Encoding compared as entries: byte for byte when uncompressed, else what they decode to.
  defp same_encode(ctx, args, stdin) do
    {rout, rstatus, _} = rust(ctx, args, stdin)
    {eout, estatus, eerr} = elixir(args, stdin)
    assert estatus == rstatus, "#{inspect(args)}: #{eerr}"

    if estatus == 0 do
      {:ok, r} = Larder.Entry.decode(rout)
      {:ok, e} = Larder.Entry.decode(eout)
      assert e == r

      # JSON payloads may write numbers differently (FORMAT.md §6: Rust keeps each number's text).
      if e.compressor == :none and e.serializer != :json,
        do: assert(eout == rout, "byte identity for #{inspect(args)}")
    end

    {eout, estatus}
  end

  test "key derives what the Rust binary derives for every keys.json URL, with flags", ctx do
    doc = Larder.JSON.decode!(File.read!(Path.join(@vectors, "keys.json")))

    for v <- doc["http"] do
      ns = if v["namespace"], do: ["--namespace", v["namespace"]], else: []

      drop =
        case v["drop"] do
          nil -> []
          list -> ["--no-default-drops" | Enum.flat_map(list, &["--drop", &1])]
        end

      {out, 0} = same(ctx, ["key", v["url"], "--method", v["method"]] ++ ns ++ drop)
      assert out == v["key"] <> "\n"
    end
  end

  test "usage errors exit 2 with one larder: line, as the Rust binary does", ctx do
    for args <- [
          [],
          ["nope"],
          ["key"],
          ["key", "no-scheme"],
          ["key", "http://a/", "--method", "GET", "--method", "PUT"],
          ["inspect", "--max-size", "-1"],
          ["inspect", "a", "b"],
          ["inspect", "--json=yes"],
          ["encode", "--compressor", "xz"],
          ["encode", "--level", "99999999999"],
          ["inspect", "/nonexistent/file"]
        ] do
      {_, status} = same(ctx, args)
      assert status == 2, inspect(args)
    end

    for cmd <- [["--help"], ["inspect", "--help"], ["key", "--help"], ["encode", "--help"]] do
      assert {_, 0, ""} = elixir(cmd)
    end
  end

  test "on a terminal, long lines are cut to 200 characters, as spec/CLI.md says", ctx do
    {entry, 0} =
      same_encode(
        ctx,
        ["encode", "--serializer", "text", "--created-at", "0"],
        String.duplicate("x", 300)
      )

    {out, 0} = same(ctx, ["inspect"], entry, %{"LARDER_FORCE_TTY" => "1"})
    assert out =~ "value:       \"" <> String.duplicate("x", 199) <> "… (102 more characters)\n"
    same(ctx, ["inspect", "--full", "--body"], entry, %{"LARDER_FORCE_TTY" => "1"})
  end
end
