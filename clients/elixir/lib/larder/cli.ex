defmodule Larder.CLI do
  @moduledoc """
  The format commands of spec/CLI.md (`encode`, `inspect`, `key`) with the flags, output and exit statuses every
  larder implementation shares, so an entry can be checked from Elixir as from Rust, Python or Ruby. Run as the
  escript `larder-ex` (`mix escript.build`) or as `mix larder.inspect` / `mix larder.key` / `mix larder.encode`.
  """

  alias Larder.{Compressors, Entry, JSON, Keys, Ordered, Report, Response}

  @commands %{
    "encode" => %{
      "--serializer" => {"SERIALIZER", :once, ~w(raw msgpack json text)},
      "--compressor" => {"COMPRESSOR", :once, ~w(none lz4 snappy zstd brotli gzip)},
      "--ttl" => {"SECS", :once, :u64},
      "--stale" => {"SECS", :once, :u64},
      "--created-at" => {"MS", :once, :u64},
      "--version" => {"V", :once, nil},
      "--tag" => {"T", :many, nil},
      "--threshold" => {"BYTES", :once, :u64},
      "--level" => {"N", :once, :i32},
      "--kind" => {"KIND", :once, ~w(value response)},
      "--json-input" => {nil, :flag, nil}
    },
    "inspect" => %{
      "--json" => {nil, :flag, nil},
      "--max-size" => {"BYTES", :once, :u64},
      "--body" => {nil, :flag, nil},
      "--full" => {nil, :flag, nil}
    },
    "key" => %{
      "--method" => {"METHOD", :once, nil},
      "--namespace" => {"NAMESPACE", :once, nil},
      "--drop" => {"PARAM", :many, nil},
      "--no-default-drops" => {nil, :flag, nil}
    }
  }

  @help %{
    nil =>
      "Usage: larder <COMMAND>\n\nEncode, inspect and key larder entries (spec/FORMAT.md, spec/CLI.md).\n\n" <>
        "Commands:\n  encode   encode stdin as an entry, written to stdout\n  " <>
        "inspect  print an entry's header and decoded value\n  key      print the cache key of a request URL\n",
    "encode" =>
      "Usage: larder encode [--serializer raw|msgpack|json|text] " <>
        "[--compressor none|lz4|snappy|zstd|brotli|gzip]\n       " <>
        "[--ttl SECS] [--stale SECS] [--created-at MS] [--version V] [--tag T]...\n       " <>
        "[--threshold BYTES] [--level N] [--kind value|response] [--json-input]\n\n" <>
        "Encode stdin as a larder entry, written to stdout. With --serializer text, stdin's text (UTF-8) " <>
        "is stored verbatim;\nwith raw, stdin's bytes; with msgpack or json, stdin is one JSON document.\n",
    "inspect" =>
      "Usage: larder inspect [FILE|-] [--json] [--max-size BYTES] [--body] [--full]\n\n" <>
        "Print an entry's header and decoded value; exits 1 naming the error kind for an invalid entry.\n",
    "key" =>
      "Usage: larder key URL [--method M] [--namespace N] [--drop PARAM]... [--no-default-drops]\n\n" <>
        "Print the cache key of a request URL (spec/FORMAT.md §5.3).\n"
  }

  @u64_max 0xFFFF_FFFF_FFFF_FFFF

  @doc "The escript's entry point: runs, prints, and halts with the status."
  def main(argv) do
    :io.setopts(:standard_io, binary: true, encoding: :latin1)
    {status, out, err} = run(argv, fn -> IO.binread(:stdio, :eof) end)
    IO.binwrite(:stdio, out)
    if err != "", do: IO.binwrite(:stderr, err)
    System.halt(status)
  end

  @doc """
  Runs one command: `{status, stdout_bytes, stderr_bytes}`. `read_stdin` gives stdin's bytes when a command needs
  them. Never raises.
  """
  def run(argv, read_stdin) do
    {0, command(argv, read_stdin), ""}
  catch
    {__MODULE__, status, message} -> {status, "", "larder: #{message}\n"}
  end

  defp fail(status, message), do: throw({__MODULE__, status, message})

  defp command([h | _], _) when h in ["-h", "--help"], do: @help[nil]
  defp command([], _), do: fail(2, "a subcommand is required (see --help)")

  defp command([cmd | rest], read_stdin) do
    unless Map.has_key?(@commands, cmd),
      do: fail(2, "unrecognized subcommand '#{cmd}' (see --help)")

    {opts, positionals} = parse(@commands[cmd], rest, %{}, [])

    cond do
      opts[:help] -> @help[cmd]
      cmd == "encode" -> encode(opts, positionals, read_stdin)
      cmd == "inspect" -> inspect_entry(opts, positionals, read_stdin)
      true -> key(opts, positionals)
    end
  end

  defp parse(_spec, [], opts, pos), do: {opts, Enum.reverse(pos)}
  defp parse(_spec, ["--" | rest], opts, pos), do: {opts, Enum.reverse(pos, rest)}

  defp parse(spec, [h | rest], opts, pos) when h in ["-h", "--help"],
    do: parse(spec, rest, Map.put(opts, :help, true), pos)

  defp parse(spec, [arg | rest], opts, pos) do
    if not String.starts_with?(arg, "-") or arg == "-" do
      parse(spec, rest, opts, [arg | pos])
    else
      {name, inline} =
        case :binary.split(arg, "=") do
          [n, v] -> {n, v}
          [n] -> {n, nil}
        end

      case spec[name] do
        nil ->
          fail(2, "unexpected argument '#{arg}' found (see --help)")

        {metavar, kind, choices} ->
          option(spec, name, inline, metavar, kind, choices, rest, opts, pos)
      end
    end
  end

  defp option(spec, name, inline, metavar, kind, choices, rest, opts, pos) do
    key = name |> String.trim_leading("-") |> String.replace("-", "_") |> String.to_atom()
    label = if metavar, do: "#{name} <#{metavar}>", else: name
    once = "the argument '#{label}' cannot be used multiple times (see --help)"

    if kind == :flag do
      if inline, do: fail(2, "unexpected value '#{inline}' for '#{name}' found (see --help)")
      if opts[key], do: fail(2, once)
      parse(spec, rest, Map.put(opts, key, true), pos)
    else
      {value, rest} =
        case {inline, rest} do
          {nil, [v | r]} ->
            {v, r}

          {nil, []} ->
            fail(2, "a value is required for '#{label}' but none was supplied (see --help)")

          {v, r} ->
            {v, r}
        end

      value = convert(value, label, choices)

      if kind == :many do
        parse(spec, rest, Map.update(opts, key, [value], &(&1 ++ [value])), pos)
      else
        if Map.has_key?(opts, key), do: fail(2, once)
        parse(spec, rest, Map.put(opts, key, value), pos)
      end
    end
  end

  defp convert(value, label, choices) when is_list(choices) do
    if value in choices,
      do: value,
      else: fail(2, "invalid value '#{value}' for '#{label}' (see --help)")
  end

  defp convert(value, label, :u64) do
    with true <- Regex.match?(~r/\A\+?[0-9]+\z/, value),
         n when n <= @u64_max <- String.to_integer(String.trim_leading(value, "+")) do
      n
    else
      _ ->
        fail(
          2,
          "invalid value '#{value}' for '#{label}': expected an integer in 0..2^64-1 (see --help)"
        )
    end
  end

  defp convert(value, label, :i32) do
    with true <- Regex.match?(~r/\A[+-]?[0-9]+\z/, value),
         n when n >= -2_147_483_648 and n <= 2_147_483_647 <-
           String.to_integer(String.trim_leading(value, "+")) do
      n
    else
      _ ->
        fail(2, "invalid value '#{value}' for '#{label}': expected a 32-bit integer (see --help)")
    end
  end

  defp convert(value, _, nil), do: value

  # ----------------------------------------------------------------------------------------- inspect

  defp inspect_entry(opts, positionals, read_stdin) do
    if length(positionals) > 1,
      do: fail(2, "unexpected argument '#{Enum.at(positionals, 1)}' found (see --help)")

    file = List.first(positionals) || "-"
    data = if file == "-", do: stdin(read_stdin), else: read_file(file)

    report =
      case Report.of(data, Map.get(opts, :max_size, Compressors.default_max_size())) do
        {:ok, r} ->
          r

        {:error, {:unsupported_compressor, name}} ->
          fail(
            1,
            "invalid entry: unsupported_compressor: #{name} (this client has no #{name} decoder)"
          )

        {:error, {kind, detail}} ->
          fail(1, "invalid entry: #{kind}: #{detail}")
      end

    if opts[:json] do
      Report.json(report)
    else
      terminal = terminal?()
      cut = terminal and not Map.get(opts, :full, false)
      out = Report.human(report, cut)
      if opts[:body], do: out <> "\n" <> Report.body_output(report, terminal, cut), else: out
    end
  end

  defp terminal? do
    case System.get_env("LARDER_FORCE_TTY") do
      "1" ->
        true

      "0" ->
        false

      _ ->
        match?({:ok, "/dev/pts/" <> _}, File.read_link("/proc/self/fd/1")) or
          match?({:ok, "/dev/tty" <> _}, File.read_link("/proc/self/fd/1"))
    end
  end

  # --------------------------------------------------------------------------------------------- key

  defp key(opts, positionals) do
    case positionals do
      [] -> fail(2, "the following required arguments were not provided: <URL> (see --help)")
      [_, extra | _] -> fail(2, "unexpected argument '#{extra}' found (see --help)")
      [url] -> url_key(opts, url)
    end
  end

  defp url_key(opts, url) do
    drop =
      if(opts[:no_default_drops], do: [], else: Keys.default_drop()) ++ Map.get(opts, :drop, [])

    case Keys.url_key(Map.get(opts, :method, "GET"), url,
           namespace: Map.get(opts, :namespace, ""),
           drop: drop
         ) do
      {:ok, key} -> key <> "\n"
      {:error, message} -> fail(2, message)
    end
  end

  # ------------------------------------------------------------------------------------------ encode

  defp encode(opts, positionals, read_stdin) do
    if positionals != [],
      do: fail(2, "unexpected argument '#{hd(positionals)}' found (see --help)")

    data = stdin(read_stdin)
    serializer = Map.get(opts, :serializer, "msgpack")

    entry_opts = [
      compressor: String.to_atom(Map.get(opts, :compressor, "lz4")),
      threshold: Map.get(opts, :threshold, 1024),
      level: opts[:level],
      created_at: opts[:created_at],
      ttl_ms: min(Map.get(opts, :ttl, 0) * 1000, @u64_max),
      stale_ms: min(Map.get(opts, :stale, 0) * 1000, @u64_max),
      version: opts[:version],
      tags: Map.get(opts, :tag, [])
    ]

    try do
      cond do
        opts[:kind] == "response" ->
          if serializer != "msgpack", do: fail(2, "--kind response needs --serializer msgpack")
          Entry.encode_response(response_from(json_document(data)), entry_opts)

        serializer in ["text", "raw"] and not Map.get(opts, :json_input, false) ->
          if serializer == "text" and not String.valid?(data),
            do:
              fail(
                2,
                "stdin is not UTF-8 text (--serializer text); use --serializer raw for other bytes"
              )

          Entry.encode(data, [serializer: String.to_atom(serializer)] ++ entry_opts)

        true ->
          value = value_from(json_document(data), serializer)
          Entry.encode(value, [serializer: String.to_atom(serializer)] ++ entry_opts)
      end
    rescue
      e in ArgumentError -> fail(2, "cannot encode: #{Exception.message(e)}")
    end
  end

  defp json_document(data) do
    case JSON.decode(data, objects: :ordered) do
      {:ok, doc} -> JSON.dedup(doc)
      {:error, message} -> fail(2, "stdin is not a JSON document: #{message}")
    end
  end

  defp value_from(doc, "text") when is_binary(doc), do: doc

  defp value_from(_, "text"),
    do: fail(2, "--serializer text --json-input needs a JSON string on stdin")

  defp value_from(doc, "raw"),
    do: bytes_from(doc, "--serializer raw --json-input needs a JSON string or {\"$base64\": ...}")

  defp value_from(doc, "json") do
    if Enum.any?([:nan, :infinity, :neg_infinity], &contains?(doc, &1)),
      do: fail(2, "cannot encode: a non-finite number (the json serializer)")

    doc
  end

  defp value_from(doc, _), do: doc

  defp contains?(x, x), do: true
  defp contains?(%Ordered{pairs: p}, x), do: Enum.any?(p, fn {_, v} -> contains?(v, x) end)
  defp contains?(l, x) when is_list(l), do: Enum.any?(l, &contains?(&1, x))
  defp contains?(_, _), do: false

  defp response_from(%Ordered{} = doc) do
    get = fn k -> Enum.find_value(doc.pairs, fn {kk, v} -> if kk == k, do: {:ok, v} end) end
    has = fn k -> get.(k) != nil end

    status =
      case get.("status") do
        {:ok, s} when is_integer(s) -> s
        _ -> fail(2, "a response document needs an integer \"status\"")
      end

    headers =
      case get.("headers") do
        nil -> []
        {:ok, l} when is_list(l) -> Enum.map(l, &header_pair/1)
        _ -> fail(2, "\"headers\" must be a list of [name, value]")
      end

    body =
      if has.("body"),
        do: bytes_from(elem(get.("body"), 1), "\"body\" must be a string or {\"$base64\": ...}"),
        else: ""

    encoding =
      case get.("content_encoding") do
        nil -> "identity"
        {:ok, e} when is_binary(e) -> e
        _ -> fail(2, "\"content_encoding\" must be a string")
      end

    canonical = if ascii?(encoding), do: String.downcase(encoding), else: encoding

    unless canonical in Response.content_encodings(),
      do:
        fail(
          2,
          "unknown content encoding #{inspect(encoding)} (expected identity, gzip, br or zstd)"
        )

    Response.new(status, headers, body, canonical)
  rescue
    e in ArgumentError -> fail(2, Exception.message(e))
  end

  defp response_from(_), do: fail(2, "a response document needs an integer \"status\"")

  defp ascii?(s), do: for(<<c <- s>>, reduce: true, do: (acc -> acc and c < 128))

  defp header_pair([n, v]),
    do:
      {bytes_from(n, "a header name must be a string"),
       bytes_from(v, "a header value must be a string")}

  defp header_pair(_), do: fail(2, "each header must be a [name, value] pair")

  defp bytes_from(s, _) when is_binary(s), do: s

  defp bytes_from(%Ordered{pairs: [{"$base64", b}]}, what) when is_binary(b) do
    case Base.decode64(b) do
      {:ok, bytes} -> bytes
      :error -> fail(2, "bad base64: #{what}")
    end
  end

  defp bytes_from(_, what), do: fail(2, what)

  defp stdin(read_stdin) do
    case read_stdin.() do
      data when is_binary(data) -> data
      :eof -> ""
      {:error, why} -> fail(2, "cannot read stdin: #{inspect(why)}")
    end
  end

  defp read_file(path) do
    case File.read(path) do
      {:ok, data} -> data
      {:error, why} -> fail(2, "cannot read #{path}: #{:file.format_error(why)}")
    end
  end
end
