defmodule Larder.Stores do
  @moduledoc """
  Opens a store from its URL (spec/STORES.md §1): `memcached://`, `redis://` and `file://` give a handle at once;
  `memory://` needs an owner process, so it is started by `Larder.Cache` (or `Larder.Stores.Memory.start_link/1`).
  Returns `{:ok, %Larder.Store{}}` or `{:error, %Larder.StoreError{kind: :url}}`; an unknown option is an error.
  """

  alias Larder.{Store, StoreError}

  def open(url) when is_binary(url) do
    with {:ok, parsed} <- Store.URL.parse(url) do
      try do
        case parsed.scheme do
          "memcached" ->
            {:ok, Larder.Stores.Memcached.open(parsed)}

          "redis" ->
            {:ok, Larder.Stores.Redis.open(parsed)}

          "file" ->
            {:ok, Larder.Stores.File.open(parsed)}

          "memory" ->
            {:error,
             StoreError.new(
               "memory",
               :url,
               "memory:// is opened by Larder.Cache (it needs an owner process)"
             )}

          other ->
            {:error,
             StoreError.new(
               other,
               :url,
               "#{Store.URL.redact(url)}: this client has no #{other}:// store (see README)"
             )}
        end
      rescue
        e in ArgumentError -> {:error, StoreError.new(parsed.scheme, :url, Exception.message(e))}
      end
    else
      {:error, message} -> {:error, StoreError.new("store", :url, message)}
    end
  end
end
