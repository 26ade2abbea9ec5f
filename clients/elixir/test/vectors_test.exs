# Every case of every spec/vectors file, as one ExUnit test each, from the same Larder.Conformance the matrix runs.
defmodule Larder.VectorsTest do
  use ExUnit.Case, async: true

  @vectors Path.expand("../../../spec/vectors", __DIR__)

  for file <-
        ~w(entries.json invalid.json keys.json ring.json stores.json signed.json storage.json) do
    path = Path.join(@vectors, file)
    @external_resource path
    {:ok, cases} = Larder.Conformance.cases(path)

    for {{name, _}, index} <- Enum.with_index(cases) do
      @tag vector_file: file, index: index
      test "#{file} ##{index} #{name}", %{vector_file: file, index: index} do
        {_, check} = Enum.at(cached(file), index)
        check.()
      end
    end
  end

  # The file read once per run (each test runs one of its cases).
  defp cached(file) do
    case :persistent_term.get({__MODULE__, file}, nil) do
      nil ->
        {:ok, cases} = Larder.Conformance.cases(Path.join(@vectors, file))
        :persistent_term.put({__MODULE__, file}, cases)
        cases

      cases ->
        cases
    end
  end

  test "the runner reports every file on one JSON line, in the contract's field order" do
    for file <-
          ~w(entries.json invalid.json keys.json ring.json stores.json signed.json storage.json) do
      report = Larder.Conformance.report(Path.join(@vectors, file))
      line = Larder.JSON.encode!(report)

      assert line =~
               ~r/^\{"language":"elixir","file":"#{file}","status":"pass","cases":\d+,"failed":\[\],"reason":null\}$/
    end
  end

  test "an unknown or unreadable file is a failure, not a pass" do
    assert Larder.Conformance.get(Larder.Conformance.report("/nonexistent/new.json"), "status") ==
             "fail"

    assert Larder.Conformance.get(
             Larder.Conformance.report("/nonexistent/entries.json"),
             "status"
           ) == "fail"
  end

  test "a wrong case is reported by name" do
    dir = System.tmp_dir!() |> Path.join("larder-ex-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    path = Path.join(dir, "keys.json")
    text = File.read!(Path.join(@vectors, "keys.json"))

    File.write!(
      path,
      String.replace(text, "GET:https://example.com/\"", "GET:https://wrong.example/\"",
        global: false
      )
    )

    report = Larder.Conformance.report(path)
    assert Larder.Conformance.get(report, "status") == "fail"
    assert Larder.Conformance.get(report, "failed") == ["http/basic"]
  after
    :ok
  end
end
