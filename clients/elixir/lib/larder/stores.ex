defmodule Larder.Stores do
  @moduledoc """
  Opens a store from its URL (spec/STORES.md §1): `memcached://`, `redis://`, `file://` and `sqlite://` give a handle at once (`postgres://` is refused as `:unsupported`, README);
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

          "sqlite" ->
            Larder.Stores.SQLite.open(parsed)

          "postgres" ->
            {:error,
             StoreError.new(
               "postgres",
               :unsupported,
               "#{Store.URL.redact(url)}: this client has no postgres:// store: Debian's erlang-p1-pgsql has no deadline per query and trusts the sizes a server announces (see README)"
             )}

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
