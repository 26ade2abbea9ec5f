defmodule Larder.StoreError do
  @moduledoc """
  A store failed (spec/STORES.md §2): the backend, for remote stores the server (`host:port`), a `kind` a caller
  can match on, and a message. Stores return `{:error, %Larder.StoreError{}}`; they never raise to the caller.

  Kinds: `:invalid_key` (refused before anything was sent), `:too_large`, `:not_a_counter`, `:unsupported`,
  `:timeout`, `:unavailable` (cannot connect, closed, or ejected), `:malformed` (a reply that breaks a bound or
  does not parse), `:server` (an error answer), `:url`.
  """

  defexception [:backend, :server, :kind, :message]

  @type t :: %__MODULE__{
          backend: String.t(),
          server: String.t() | nil,
          kind: atom(),
          message: String.t()
        }

  def new(backend, kind, message, server \\ nil),
    do: %__MODULE__{backend: backend, kind: kind, message: message, server: server}

  @impl true
  def message(%__MODULE__{backend: b, server: nil, kind: k, message: m}), do: "#{b}: #{k}: #{m}"

  def message(%__MODULE__{backend: b, server: s, kind: k, message: m}),
    do: "#{b} #{s}: #{k}: #{m}"

  @doc "`{:error, …}` for a key the stores refuse, or `:ok`."
  def check_key(backend, key) when is_binary(key) do
    case Larder.Keys.key_problem(key) do
      nil ->
        :ok

      why ->
        {:error,
         new(
           backend,
           :invalid_key,
           "#{inspect(binary_part(key, 0, min(80, byte_size(key))))}: #{why}"
         )}
    end
  end

  def check_key(backend, key),
    do: {:error, new(backend, :invalid_key, "#{inspect(key)}: not a binary")}

  @doc "Checks every key of a list."
  def check_keys(backend, keys) do
    Enum.find_value(keys, :ok, fn k ->
      case check_key(backend, k) do
        :ok -> nil
        e -> e
      end
    end)
  end

  @doc "`{:error, …}` for a purge prefix the stores refuse, or `:ok`."
  def check_prefix(backend, prefix) do
    case Larder.Keys.prefix_problem(prefix) do
      nil -> :ok
      why -> {:error, new(backend, :invalid_key, "prefix #{inspect(prefix)}: #{why}")}
    end
  end
end
