defmodule Larder.Conformance do
  @moduledoc """
  The Elixir column of the conformance matrix (spec/vectors/README.md, "Conformance runners"):

      clients/elixir/bin/conformance spec/vectors/entries.json

  prints one JSON line per file (`{"language":"elixir","file":…,"status":…,"cases":N,"failed":[…],"reason":…}`).
  The ExUnit suite runs the same cases (test/vectors_test.exs, test/hostile_vectors_test.exs), so the matrix and
  the suite cannot disagree. The hostile_*.json files are `Larder.Conformance.Hostile`'s, outage.json
  `Larder.Conformance.Outage`'s.
  A case is a name and a function that raises on a mismatch. zstd and brotli entries need
  `Larder.Codecs.Native` (priv/bin/larder_codec); only when it is not built do their cases pass on the clear
  `{:unsupported_compressor, name}` error instead (see README).
  """

  alias Larder.{Entry, JSON, Keys, Ordered, Response, Ring, SignedExt}

  @not_applicable %{}
  @files ~w(entries.json invalid.json keys.json ring.json stores.json signed.json storage.json outage.json) ++
           Larder.Conformance.Hostile.files()

  defmodule Mismatch do
    defexception [:message]
  end

  @doc "Prints one report line per path."
  def main(paths) do
    if paths == [] do
      IO.puts(:stderr, "usage: clients/elixir/bin/conformance FILE… (files of spec/vectors)")
      System.halt(2)
    end

    # The stores' pools, health table and SQLite connections (hostile_*.json) live under the application.
    {:ok, _} = Application.ensure_all_started(:larder)
    Enum.each(paths, &IO.puts(JSON.encode!(report(&1))))
  end

  @doc """
  The report (an `Ordered`) for one vector file. `env` gives the servers the hostile_*.json files need
  (`Larder.Conformance.Hostile`); the process environment by default.
  """
  def report(path, env \\ System.get_env()) do
    file = Path.basename(path)
    base = [language: "elixir", file: file, status: "pass", cases: 0, failed: [], reason: nil]

    result =
      cond do
        Map.has_key?(@not_applicable, file) ->
          {:na, @not_applicable[file]}

        file not in @files ->
          {:fail, "#{file} is not a vector file this runner knows: add it to Larder.Conformance"}

        true ->
          with :ok <- missing(file, env), do: run_cases(path, env)
      end

    fields =
      case result do
        {:error, why} -> set(base, status: "fail", reason: why)
        {:na, why} -> set(base, status: "not_applicable", reason: why)
        {:fail, why} -> set(base, status: "fail", reason: why)
        {:ok, n, []} -> Keyword.replace(base, :cases, n)
        {:ok, n, failed} -> failed_report(base, n, failed)
      end

    %Ordered{pairs: Enum.map(fields, fn {k, v} -> {Atom.to_string(k), v} end)}
  end

  defp missing("outage.json", env) do
    case Enum.reject(Larder.Conformance.Outage.needs(), &(env[&1] not in [nil, ""])) do
      [] ->
        :ok

      vars ->
        {:error, "#{Enum.join(vars, " and ")} not set (spec/vectors/README.md, outage.json)"}
    end
  end

  defp missing(file, env), do: Larder.Conformance.Hostile.missing(file, env)

  defp failed_report(base, n, failed) do
    names = failed |> Enum.take(20) |> Enum.map(&elem(&1, 0))
    set(base, status: "fail", cases: n, failed: names, reason: failure_reason(hd(failed)))
  end

  # Replaces fields keeping the contract's order.
  defp set(base, changes), do: Enum.map(base, fn {k, v} -> {k, Keyword.get(changes, k, v)} end)

  defp failure_reason({name, message}), do: String.slice("#{name}: #{message}", 0, 500)

  defp run_cases(path, env) do
    case cases_in(path, env) do
      {:ok, cases} -> {:ok, length(cases), failures(cases)}
      {:error, why} -> {:fail, why}
    end
  end

  @doc "`[{name, {:error, message}}]` for the cases that fail."
  def failures(cases) do
    for {name, check} <- cases, message = failure(check), message != nil, do: {name, message}
  end

  defp failure(check) do
    check.()
    nil
  rescue
    e -> e |> Exception.message() |> String.replace(~r/\s+/, " ")
  catch
    kind, value -> "#{kind}: #{inspect(value)}"
  end

  @doc """
  `{:ok, [{name, check}]}` for the vector file at `path`, or `{:error, why}`, with the process environment (see
  `cases_in/2`).
  """
  def cases(path), do: cases_in(path, System.get_env())

  @doc "`cases/1` with `env` (as for `report/2`, read when a check runs) giving the servers."
  def cases_in(path, env) do
    with {:ok, text} <- File.read(path),
         {:ok, doc} <- JSON.decode(text, objects: :ordered) do
      file = Path.basename(path)

      cond do
        file in Larder.Conformance.Hostile.files() ->
          {:ok, Larder.Conformance.Hostile.cases(file, doc, Path.dirname(path), env)}

        file == "outage.json" ->
          {:ok, Larder.Conformance.Outage.cases(doc, env)}

        true ->
          {:ok, cases(file, doc)}
      end
    else
      {:error, why} -> {:error, "cannot read #{path}: #{inspect(why)}"}
    end
  end

  def cases("entries.json", doc),
    do: for(v <- get(doc, "cases"), do: {get(v, "name"), fn -> entry(v) end})

  def cases("invalid.json", doc),
    do: for(v <- get(doc, "cases"), do: {get(v, "name"), fn -> invalid(v) end})

  def cases("ring.json", doc),
    do: for(v <- get(doc, "cases"), do: {get(v, "name"), fn -> ring(v) end})

  def cases("keys.json", doc) do
    for section <- ~w(http safe namespaced variants alternates),
        v <- get(doc, section),
        do: {"#{section}/#{get(v, "name")}", fn -> key_case(section, v) end}
  end

  def cases("stores.json", doc) do
    for {v, i} <- Enum.with_index(get(doc, "cases")),
        do: {get(v, "name") || "#{get(v, "kind")}-#{i}", fn -> store_key(v) end}
  end

  def cases("storage.json", doc), do: Larder.Conformance.Storage.cases(doc)

  def cases("signed.json", doc) do
    for section <- ~w(signed refused rotation),
        v <- get(doc, section),
        do: {"#{section}/#{get(v, "name")}", fn -> signed(section, v) end}
  end

  # -------------------------------------------------------------------------------------------- entries

  @doc "Field `key` of a JSON object read as `Ordered` (or a map)."
  def get(%Ordered{pairs: pairs}, key),
    do: Enum.find_value(pairs, fn {k, v} -> if k == key, do: v end)

  def get(map, key) when is_map(map), do: Map.get(map, key)

  defp entry(v) do
    data = hex(get(v, "entry_hex"))
    decodes(v, data)

    unless get(v, "decode_only") do
      case encode(v) do
        :unsupported ->
          :ok

        encoded ->
          decodes(v, encoded)

          if get(v, "stored_compressor") == "none",
            do: eq(get(v, "entry_hex"), Base.encode16(encoded, case: :lower), "byte identity")
      end
    end
  end

  defp decodes(v, data) do
    native = Larder.Codecs.Native.available?()
    o = get(v, "options")
    stored = get(v, "stored_compressor")

    case Entry.decode(data) do
      {:error, {:unsupported_compressor, name}}
      when stored in ["zstd", "brotli"] and not native ->
        eq(stored, Atom.to_string(name), "unsupported compressor")

      {:error, reason} ->
        raise Mismatch, "decode failed: #{inspect(reason)}"

      {:ok, e} ->
        eq(get(v, "kind"), Atom.to_string(e.kind), "kind")
        eq(get(o, "serializer"), Atom.to_string(e.serializer), "serializer")
        eq(stored, Atom.to_string(e.compressor), "compressor")

        for f <- ~w(created_at expires_at stale_ms version tags),
            do: eq(get(o, f), Map.fetch!(e, String.to_atom(f)), f)

        eq(expected_value(v), e.value, "value")
    end
  end

  defp encode(v) do
    o = get(v, "options")

    opts = [
      compressor: String.to_atom(get(o, "compressor")),
      threshold: get(o, "threshold"),
      level: get(o, "level"),
      created_at: get(o, "created_at"),
      expires_at: get(o, "expires_at"),
      stale_ms: get(o, "stale_ms"),
      version: get(o, "version"),
      tags: get(o, "tags")
    ]

    if opts[:compressor] in [:zstd, :brotli] and not Larder.Codecs.Native.available?() do
      :unsupported
    else
      if get(v, "kind") == "response",
        do: Entry.encode_response(response(v), opts),
        else:
          Entry.encode(input_value(v), [serializer: String.to_atom(get(o, "serializer"))] ++ opts)
    end
  end

  # The value to encode: JSON documents keep their order (byte identity), duplicates merged.
  defp input_value(v) do
    case get(get(v, "options"), "serializer") do
      "text" -> get(v, "value_text")
      "raw" -> Base.decode64!(get(v, "value_base64"))
      _ -> JSON.dedup(get(v, "value"))
    end
  end

  # The value to compare with what decoding gives: maps as maps.
  defp expected_value(v) do
    if get(v, "kind") == "response",
      do: response(v),
      else: Ordered.plain(JSON.dedup(input_value(v)))
  end

  defp response(v) do
    r = get(v, "response")
    headers = for [n, val] <- get(r, "headers"), do: {header_bytes(n), header_bytes(val)}

    Response.new(
      get(r, "status"),
      headers,
      Base.decode64!(get(r, "body_base64")),
      get(r, "content_encoding")
    )
  end

  defp header_bytes(s) when is_binary(s), do: s
  defp header_bytes(o), do: Base.decode64!(get(o, "$base64"))

  defp invalid(v) do
    opts = if get(v, "max_size"), do: [max_size: get(v, "max_size")], else: []
    want = get(v, "error")

    case Entry.decode(hex(get(v, "entry_hex")), opts) do
      {:ok, e} ->
        raise Mismatch, "decoded to #{inspect(e, limit: 5)}, expected #{want}"

      {:error, {:unsupported_compressor, _}} = e ->
        if Larder.Codecs.Native.available?(),
          do: raise(Mismatch, "#{inspect(e)} with the codec program built")

        case Larder.Header.read(hex(get(v, "entry_hex"))) do
          {:ok, %{compressor: c}} when c in [:zstd, :brotli] -> :ok
          other -> raise Mismatch, "unsupported_compressor for #{inspect(other)}"
        end

      {:error, {kind, detail}} ->
        eq(want, Atom.to_string(kind), "error kind (#{detail})")
    end
  end

  # ------------------------------------------------------------------------------------- keys, ring

  defp key_case("http", v) do
    opts = [namespace: get(v, "namespace"), drop: get(v, "drop") || Keys.default_drop()]
    {:ok, key} = Keys.url_key(get(v, "method"), get(v, "url"), opts)
    eq(get(v, "key"), key, "key")
  end

  defp key_case("safe", v), do: eq(get(v, "safe"), Keys.safe_key(get(v, "key")), "safe key")

  defp key_case("namespaced", v),
    do:
      eq(
        get(v, "full"),
        Keys.namespaced_key(get(v, "namespace"), get(v, "key")),
        "namespaced key"
      )

  defp key_case("variants", v) do
    marker = Ordered.plain(get(v, "marker"))
    headers = for [n, val] <- get(v, "request_headers"), do: {n, header_bytes(val)}

    eq(
      get(v, "variant_key"),
      Keys.variant_key(get(v, "base_key"), marker, headers),
      "variant key"
    )
  end

  defp key_case("alternates", v) do
    alt = Keys.alternate_key(get(v, "entry_key"), get(v, "coding"))
    eq(get(v, "alternate_key"), alt, "alternate key")

    unless alt in Keys.url_keys(get(v, "entry_key")),
      do: raise(Mismatch, "url_keys lacks the alternate")
  end

  defp ring(v) do
    all = for s <- get(v, "servers"), do: {get(s, "host"), get(s, "port"), get(s, "weight")}
    ejected = get(v, "ejected") || []
    indexes = Enum.reject(0..(length(all) - 1), &(&1 in ejected))
    ring = Ring.new(Enum.map(indexes, &Enum.at(all, &1)), indexes)
    points = Ring.points(ring)
    eq(get(v, "points"), length(points), "points")

    eq(
      get(v, "first_points"),
      points |> Enum.take(8) |> Enum.map(&Tuple.to_list/1),
      "first points"
    )

    for k <- get(v, "keys") do
      eq(get(k, "hash"), Ring.hash(get(k, "key")), "hash of #{get(k, "key")}")
      eq(get(k, "server"), Ring.server(ring, get(k, "key")), "server of #{get(k, "key")}")
    end
  end

  defp store_key(v) do
    case get(v, "kind") do
      "stored" ->
        eq(get(v, "stored_key"), Keys.stored_key(get(v, "prefix"), get(v, "key")), "stored key")

      "internal" ->
        eq(
          get(v, "stored_key"),
          Keys.internal_key(get(v, "prefix"), get(v, "purpose"), get(v, "name")),
          "internal"
        )

      "refused" ->
        if Keys.key_problem(hex(get(v, "key_hex"))) == nil,
          do: raise(Mismatch, "the key was accepted")

      "accepted" ->
        key = hex(get(v, "key_hex"))
        eq(nil, Keys.key_problem(key), "key problem")
        eq(key, Keys.safe_key(key), "an accepted key is its own safe key")

      other ->
        raise Mismatch, "unknown kind #{inspect(other)}"
    end
  end

  # ---------------------------------------------------------------------------------------- signed

  defp signed("signed", v) do
    secret = get(v, "secret")
    type = get(v, "ext_type")
    payload = hex(get(v, "payload_hex"))

    eq(
      get(v, "signing_key_hex"),
      Base.encode16(SignedExt.signing_key(secret), case: :lower),
      "signing key"
    )

    eq(
      get(v, "data_hex"),
      Base.encode16(SignedExt.sign(secret, type, payload), case: :lower),
      "signed data"
    )

    eq({:ok, payload}, SignedExt.verify([secret], type, hex(get(v, "data_hex"))), "verified")
    {:ok, e} = Entry.decode(hex(get(v, "entry_hex")))

    eq(
      %Larder.Ext{type: type, data: hex(get(v, "data_hex"))},
      e.value,
      "the entry holds the ext, opaque"
    )
  end

  defp signed("refused", v) do
    eq(
      :refused,
      SignedExt.verify(get(v, "secrets"), get(v, "ext_type"), hex(get(v, "data_hex"))),
      "refused"
    )

    {:ok, e} = Entry.decode(hex(get(v, "entry_hex")))
    unless match?(%Larder.Ext{}, e.value), do: raise(Mismatch, "the value is not an opaque ext")
  end

  defp signed("rotation", v) do
    [current | _] = secrets = get(v, "secrets")
    data = hex(get(v, "data_hex"))
    payload = hex(get(v, "payload_hex"))

    eq(
      {:ok, payload},
      SignedExt.verify(secrets, get(v, "ext_type"), data),
      "accepted with a fallback"
    )

    eq(:refused, SignedExt.verify([current], get(v, "ext_type"), data), "refused without it")
  end

  defp hex(s), do: Base.decode16!(s, case: :mixed)

  defp eq(expected, got, what) do
    unless expected == got,
      do:
        raise(
          Mismatch,
          "#{what}: expected #{inspect(expected, limit: 8)}, got #{inspect(got, limit: 8)}"
        )
  end
end
