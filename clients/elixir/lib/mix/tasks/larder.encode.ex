defmodule Mix.Tasks.Larder.Encode do
  @shortdoc "larder encode (spec/CLI.md), as the escript larder-ex does"
  @moduledoc """
  `mix larder.encode ARGS…` runs `larder encode ARGS…` of spec/CLI.md (see Larder.CLI) and exits with its status.
  """
  use Mix.Task

  @impl true
  def run(args), do: Larder.CLI.main(["encode" | args])
end
