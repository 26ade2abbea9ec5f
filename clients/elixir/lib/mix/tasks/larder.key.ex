defmodule Mix.Tasks.Larder.Key do
  @shortdoc "larder key (spec/CLI.md), as the escript larder-ex does"
  @moduledoc """
  `mix larder.key ARGS…` runs `larder key ARGS…` of spec/CLI.md (see Larder.CLI) and exits with its status.
  """
  use Mix.Task

  @impl true
  def run(args), do: Larder.CLI.main(["key" | args])
end
