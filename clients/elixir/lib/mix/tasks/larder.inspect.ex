defmodule Mix.Tasks.Larder.Inspect do
  @shortdoc "larder inspect (spec/CLI.md), as the escript larder-ex does"
  @moduledoc """
  `mix larder.inspect ARGS…` runs `larder inspect ARGS…` of spec/CLI.md (see Larder.CLI) and exits with its status.
  """
  use Mix.Task

  @impl true
  def run(args), do: Larder.CLI.main(["inspect" | args])
end
