defmodule Larder.Store do
  @moduledoc """
  The store interface (spec/STORES.md) and a handle to one store. Every backend (`Larder.Stores.Memory`,
  `.File`, `.Memcached`, `.Redis`, `.SQLite`) implements these callbacks over safe keys (§2: at most 250 bytes, no byte
  0x00–0x20 or 0x7F, not empty; anything else is `:invalid_key` before anything is sent) and entry bytes. Reads
  answer `{:ok, bytes}` or `:miss`; failures are `{:error, %Larder.StoreError{}}`, never an exception.
  TTLs are milliseconds (nil = none); a store never returns a value past `expiry/3`.
  """

  alias Larder.{Header, StoreError}

  defstruct [:module, :ref, :backend]

  @type t :: %__MODULE__{module: module(), ref: term(), backend: String.t()}
  @type error :: {:error, StoreError.t()}

  @callback get(ref :: term(), key :: binary()) :: {:ok, binary()} | :miss | error()
  @callback get_many(ref :: term(), keys :: [binary()]) ::
              {:ok, %{binary() => binary()}} | error()
  @callback set(
              ref :: term(),
              key :: binary(),
              value :: binary(),
              ttl_ms :: non_neg_integer() | nil
            ) :: :ok | error()
  @callback add(
              ref :: term(),
              key :: binary(),
              value :: binary(),
              ttl_ms :: non_neg_integer() | nil
            ) ::
              {:ok, boolean()} | error()
  @callback delete(ref :: term(), key :: binary()) :: {:ok, boolean()} | error()
  @callback delete_if(ref :: term(), key :: binary(), expected :: binary()) ::
              {:ok, boolean()} | error()
  @callback incr(
              ref :: term(),
              key :: binary(),
              delta :: integer(),
              ttl_ms :: non_neg_integer() | nil,
              create :: boolean()
            ) ::
              {:ok, integer()} | :missing | error()
  @callback purge_tag(ref :: term(), tag :: String.t()) ::
              {:ok, non_neg_integer() | :recorded} | error()
  @callback purge_prefix(ref :: term(), prefix :: binary()) ::
              {:ok, non_neg_integer() | :recorded} | error()
  @callback clear(ref :: term()) :: :ok | error()

  def get(%__MODULE__{module: m, ref: r}, key), do: m.get(r, key)
  def get_many(%__MODULE__{module: m, ref: r}, keys), do: m.get_many(r, keys)

  def set(%__MODULE__{module: m, ref: r}, key, value, ttl_ms \\ nil),
    do: m.set(r, key, value, ttl_ms)

  def add(%__MODULE__{module: m, ref: r}, key, value, ttl_ms \\ nil),
    do: m.add(r, key, value, ttl_ms)

  def delete(%__MODULE__{module: m, ref: r}, key), do: m.delete(r, key)
  def delete_if(%__MODULE__{module: m, ref: r}, key, expected), do: m.delete_if(r, key, expected)

  def incr(%__MODULE__{module: m, ref: r}, key, delta \\ 1, ttl_ms \\ nil, create \\ true),
    do: m.incr(r, key, delta, ttl_ms, create)

  # Tags reach a store only inside internal_key, which hashes them (spec/STORES.md §2), so any binary is one; anything
  # else is the caller's error, not a crash in a store.
  def purge_tag(%__MODULE__{module: m, ref: r}, tag) when is_binary(tag), do: m.purge_tag(r, tag)

  def purge_tag(%__MODULE__{backend: b}, tag),
    do: {:error, Larder.StoreError.new(b, :invalid_key, "tag #{inspect(tag)}: not a binary")}

  def purge_prefix(%__MODULE__{module: m, ref: r}, prefix), do: m.purge_prefix(r, prefix)
  def clear(%__MODULE__{module: m, ref: r}), do: m.clear(r)

  @doc """
  When a value must leave the store (ms since the epoch), or nil for never (§2): the earlier of `now + ttl` and
  the entry's hard expiry (`expires_at + stale_ms`) when the value is an entry that expires.
  """
  def expiry(value, ttl_ms, now) do
    by_ttl = if ttl_ms, do: now + ttl_ms, else: nil

    by_entry =
      case value do
        # An entry without stale window, version or tags, whose codes Header.read/1 accepts: what it would give,
        # without building the header (the memory store's owner does this for every write).
        <<0xC1, 0x4C, 1, kind, ser, comp, 0, _created::64, expires::little-64, _::binary>>
        when ((kind == 0 and ser < 4) or (kind == 1 and ser == 1)) and comp < 6 ->
          Header.hard_expiry(expires, 0)

        _ ->
          case Header.read(value) do
            {:ok, h} -> Header.hard_expiry(h.expires_at, h.stale_ms)
            _ -> nil
          end
      end

    case {by_ttl, by_entry} do
      {nil, e} -> e
      {t, nil} -> t
      {t, e} -> min(t, e)
    end
  end

  @doc "The tags of an entry's header (none for a value that is not an entry)."
  def entry_tags(value) do
    case Header.read(value) do
      {:ok, h} -> h.tags
      _ -> []
    end
  end

  @doc "A counter's value (ASCII decimal, trailing spaces allowed, §3), or nil."
  def parse_counter(value) do
    case Regex.run(~r/\A(-?[0-9]{1,20}) *\z/, value) do
      [_, n] ->
        i = String.to_integer(n)
        if i >= -(2 ** 63) and i < 2 ** 63, do: i, else: nil

      nil ->
        nil
    end
  end

  @doc "A counter's value clamped to signed 64 bits (§3: memory, SQL and file stores saturate at the ends)."
  def saturate(n), do: n |> min(2 ** 63 - 1) |> max(-(2 ** 63))

  @doc "Milliseconds since the epoch."
  def now_ms, do: System.os_time(:millisecond)
end
