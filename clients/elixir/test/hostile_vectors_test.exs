# The attacks every language must hold against (spec/vectors/README.md, "hostile_*.json"; issue 32), one ExUnit test
# per case, from the same Larder.Conformance.Hostile the matrix runs: hostile_keys.json on a memcached and a
# redis-server of this module's own (each case flushes them, so they are not the suite's shared ones),
# hostile_replies.json on larder-hostile (LARDER_HOSTILE, default target/debug/larder-hostile), hostile_files.json
# with spec/vectors/hostile_tree.py, hostile_pages.json on the page cache's own key derivation; and outage.json
# (Larder.Conformance.Outage: fetch with larder-faults, LARDER_FAULTS, default target/debug/larder-faults, between a
# cache and the same memcached and redis-server; its cases use fresh namespaces, and run one after another with the
# flushes of hostile_keys.json, one of them flushing the server itself).
defmodule Larder.HostileVectorsTest do
  # Async with the other modules; this module's tests run one after another, so the flushes stay its own.
  use ExUnit.Case, async: true

  alias Larder.Conformance

  @root Path.expand("../../..", __DIR__)
  @vectors Path.join(@root, "spec/vectors")

  setup_all do
    {mc, mc_port} = Larder.TestServers.memcached()
    {redis, redis_port} = Larder.TestServers.redis()

    on_exit(fn ->
      Larder.TestServers.stop(mc)
      Larder.TestServers.stop(redis)
    end)

    env = %{
      "LARDER_CONFORMANCE_MEMCACHED" => "127.0.0.1:#{mc_port}",
      "LARDER_CONFORMANCE_REDIS" => "127.0.0.1:#{redis_port}",
      "LARDER_HOSTILE" =>
        System.get_env("LARDER_HOSTILE") || Path.join(@root, "target/debug/larder-hostile"),
      "LARDER_FAULTS" =>
        System.get_env("LARDER_FAULTS") || Path.join(@root, "target/debug/larder-faults")
    }

    %{env: env}
  end

  for file <- Conformance.Hostile.files() ++ ["outage.json"] do
    path = Path.join(@vectors, file)
    @external_resource path
    {:ok, cases} = Conformance.cases_in(path, %{})

    for {{name, _}, index} <- Enum.with_index(cases) do
      @tag vector_file: file, index: index
      test "#{file} ##{index} #{name}", %{vector_file: file, index: index, env: env} do
        {:ok, cases} = Conformance.cases_in(Path.join(@vectors, file), env)
        {_, check} = Enum.at(cases, index)
        check.()
      end
    end
  end

  test "the runner reports a hostile file on one JSON line, in the contract's field order", %{
    env: env
  } do
    report = Conformance.report(Path.join(@vectors, "hostile_pages.json"), env)

    assert Larder.JSON.encode!(report) =~
             ~r/^\{"language":"elixir","file":"hostile_pages.json","status":"pass","cases":\d+,"failed":\[\],"reason":null\}$/
  end

  test "a file whose servers are not given fails, naming the variable" do
    for {file, var} <- [
          {"hostile_keys.json", "LARDER_CONFORMANCE_MEMCACHED"},
          {"hostile_keys.json", "LARDER_CONFORMANCE_REDIS"},
          {"hostile_replies.json", "LARDER_HOSTILE"},
          {"outage.json", "LARDER_FAULTS"}
        ] do
      report = Conformance.report(Path.join(@vectors, file), %{})
      assert Conformance.get(report, "status") == "fail"
      assert Conformance.get(report, "reason") =~ var
    end
  end

  # The checks are not vacuous: a vector whose expectation is not what the library does fails, by name.
  defp doctored(ctx, file, fun) do
    dir = Path.join(System.tmp_dir!(), "larder-ex-doctored-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    for f <- File.ls!(@vectors), do: File.cp!(Path.join(@vectors, f), Path.join(dir, f))
    {:ok, doc} = Larder.JSON.decode(File.read!(Path.join(@vectors, file)))
    File.write!(Path.join(dir, file), Larder.JSON.encode!(fun.(doc)))
    Conformance.report(Path.join(dir, file), ctx.env)
  end

  defp only(doc, names, change) do
    cases = for c <- doc["cases"], c["name"] in names, do: change.(c)
    Map.put(doc, "cases", cases)
  end

  test "a stored key probed at other wire bytes (latin1, as TypeScript once wrote it) fails",
       ctx do
    report =
      doctored(ctx, "hostile_keys.json", fn doc ->
        only(doc, ["u010a_low_lf", "ascii_plain"], fn c ->
          if c["name"] == "u010a_low_lf", do: Map.put(c, "wire_hex", "610a62"), else: c
        end)
      end)

    assert Conformance.get(report, "failed") == ["u010a_low_lf"]
    assert Conformance.get(report, "reason") =~ "of the wire bytes after set"
  end

  test "a key the library refuses, expected stored, fails; a page key that differs fails", ctx do
    report =
      doctored(ctx, "hostile_keys.json", fn doc ->
        only(doc, ["bytes_ff"], &Map.merge(&1, %{"outcome" => "stored", "wire_hex" => "6bff"}))
      end)

    assert Conformance.get(report, "failed") == ["bytes_ff"]

    report =
      doctored(ctx, "hostile_pages.json", fn doc ->
        only(doc, ["x_forwarded_host_untrusted"], fn c ->
          Map.put(c, "expected", %{"key" => "GET:http://evil.example/p"})
        end)
      end)

    assert Conformance.get(report, "failed") == ["x_forwarded_host_untrusted"]
  end

  test "an outage case expecting one load more than the cache runs fails, naming the step", ctx do
    report =
      doctored(ctx, "outage.json", fn doc ->
        only(doc, ["refuse_redis"], fn c ->
          steps =
            Enum.map(c["steps"], fn
              %{"expect" => e} = s -> Map.put(s, "expect", Map.put(e, "loads", 2))
              s -> s
            end)

          Map.put(c, "steps", steps)
        end)
      end)

    assert Conformance.get(report, "failed") == ["refuse_redis"]
    assert Conformance.get(report, "reason") =~ "step 1 (burst): the loader ran 1 times, not 2"
  end

  test "a file case expecting a read through a linked entry fails", ctx do
    report =
      doctored(ctx, "hostile_files.json", fn doc ->
        only(doc, ["linked_entry"], fn c ->
          Map.put(c, "operations", [%{"op" => "get", "key" => "k1", "expect" => "hit"}])
        end)
      end)

    assert Conformance.get(report, "failed") == ["linked_entry"]
    assert Conformance.get(report, "reason") =~ "expected hit, got :miss"
  end
end
