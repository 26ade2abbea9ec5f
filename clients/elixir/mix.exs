# The larder client for Elixir: the entry format, keys, ring, stores and Larder.Cache (see README.md).
# No Hex dependencies: Hex is not reachable on the machines larder is built on; the standard library and OTP cover
# what the client needs (ETS, :gen_tcp, :crypto, :zlib).
defmodule Mix.Tasks.Compile.LarderCodec do
  @moduledoc "Builds priv/bin/larder_codec (zstd and Brotli through a port) when a C compiler and the libraries are there."
  use Mix.Task.Compiler

  @impl true
  def run(_args) do
    source = "c_src/larder_codec.c"
    target = "priv/bin/larder_codec"

    if File.exists?(target) and File.stat!(target).mtime >= File.stat!(source).mtime do
      {:noop, []}
    else
      File.mkdir_p!("priv/bin")
      args = ["-O2", "-Wall", "-o", target, source, "-lzstd", "-lbrotlienc", "-lbrotlidec"]

      case System.find_executable("cc") && System.cmd("cc", args, stderr_to_stdout: true) do
        {_, 0} ->
          # Mix links _build/<env>/lib/larder/priv to priv/ only if priv/ existed when this compile began: on the
          # first compile (a fresh checkout, or larder as another project's path dependency) it did not.
          Mix.Project.build_structure()
          {:ok, []}

        _ ->
          # Without it, zstd and Brotli entries are refused as unsupported_compressor (README).
          File.rm(target)
          {:noop, []}
      end
    end
  end
end

defmodule Larder.MixProject do
  use Mix.Project

  def project do
    [
      app: :larder,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      deps: [],
      compilers: [:larder_codec] ++ Mix.compilers(),
      escript: [main_module: Larder.CLI, name: "larder-ex", app: nil],
      test_coverage: [summary: false],
      # Debian's erlang-p1-sqlite3 (module :sqlite3), on the code path when installed; sqlite:// refuses to open
      # without it.
      xref: [exclude: [:sqlite3]],
      elixirc_paths: if(Mix.env() == :test, do: ["lib", "test/support"], else: ["lib"])
    ]
  end

  def application do
    [extra_applications: [:logger, :crypto, :inets], mod: {Larder.Application, []}]
  end
end
