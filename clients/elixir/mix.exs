# The larder client for Elixir: the entry format, keys, ring, stores and Larder.Cache (see README.md).
# No Hex dependencies: Hex is not reachable on the machines larder is built on; the standard library and OTP cover
# what the client needs (ETS, :gen_tcp, :crypto, :zlib).
defmodule Larder.MixProject do
  use Mix.Project

  def project do
    [
      app: :larder,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      deps: [],
      escript: [main_module: Larder.CLI, name: "larder-ex", app: nil],
      test_coverage: [summary: false],
      elixirc_paths: if(Mix.env() == :test, do: ["lib", "test/support"], else: ["lib"])
    ]
  end

  def application do
    [extra_applications: [:logger, :crypto, :inets], mod: {Larder.Application, []}]
  end
end
