defmodule Larder.Error do
  @moduledoc """
  Why an entry is invalid (spec/FORMAT.md §7), as one exception with the kind name every larder language shares.

  Decoders return `{:error, {kind, detail}}` with `kind` one of `t:kind/0`; the raising variants (`decode!/2`)
  raise this exception. A compressor this client cannot decode is `{:error, {:unsupported_compressor, name}}`,
  which is not a §7 kind: the entry may be valid, this client just cannot read it (see README, zstd and brotli).
  """

  @kinds [
    :truncated,
    :bad_magic,
    :unsupported_version,
    :unknown_codec,
    :bad_header,
    :too_large,
    :corrupt_payload,
    :bad_value
  ]

  @type kind ::
          :truncated
          | :bad_magic
          | :unsupported_version
          | :unknown_codec
          | :bad_header
          | :too_large
          | :corrupt_payload
          | :bad_value

  @type reason :: {kind(), String.t()} | {:unsupported_compressor, atom()}

  defexception [:kind, :detail]

  @impl true
  def message(%__MODULE__{kind: :unsupported_compressor, detail: name}),
    do: "unsupported_compressor: #{name} (this client has no #{name} decoder)"

  def message(%__MODULE__{kind: kind, detail: detail}), do: "#{kind}: #{detail}"

  @doc "The error kinds of spec/FORMAT.md §7, in the spec's order."
  def kinds, do: @kinds

  @doc "Throws an invalid-entry reason; the public decoders catch it and return `{:error, reason}`."
  @spec fail(kind(), String.t()) :: no_return()
  def fail(kind, detail) when kind in @kinds, do: throw({__MODULE__, {kind, detail}})

  @doc "Throws the reason for a compressor this client cannot decode (zstd, brotli without their libraries)."
  @spec unsupported(atom()) :: no_return()
  def unsupported(name), do: throw({__MODULE__, {:unsupported_compressor, name}})

  @doc "Runs `fun`, turning a thrown reason into `{:error, reason}`."
  def catching(fun) do
    fun.()
  catch
    {__MODULE__, reason} -> {:error, reason}
  end

  @doc "The exception for an error reason."
  def exception_for({kind, detail}), do: %__MODULE__{kind: kind, detail: detail}
end
