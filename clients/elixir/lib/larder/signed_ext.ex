defmodule Larder.SignedExt do
  @moduledoc """
  Signed ext values (spec/FORMAT.md §2): ext 80 (a Python pickle) and 101 (a Ruby Marshal dump) carry an
  HMAC-SHA256 so only the application that signed them interprets them. Elixir interprets neither: it decodes them
  as opaque `Larder.Ext` values. Signing and verifying are here so a tool can check or produce such values, and so
  this client passes `spec/vectors/signed.json` byte for byte.
  """

  @doc "The signing key derived from an application secret."
  def signing_key(secret), do: :crypto.mac(:hmac, :sha256, secret, "larder.signed-ext.v1")

  @doc "The ext data for `payload` as ext `type`, signed with `secret` (scheme 1)."
  def sign(secret, type, payload) when type in 0..255 do
    <<1, mac(signing_key(secret), type, payload)::binary, payload::binary>>
  end

  @doc "`{:ok, payload}` when `data` is signed by one of `secrets` (current first), else `:refused`."
  def verify(secrets, type, data) do
    case data do
      <<1, stored::binary-size(32), payload::binary>> ->
        if Enum.any?(secrets, &:crypto.hash_equals(mac(signing_key(&1), type, payload), stored)),
          do: {:ok, payload},
          else: :refused

      _ ->
        :refused
    end
  end

  defp mac(key, type, payload),
    do: :crypto.mac(:hmac, :sha256, key, ["larder-ext", 0, type, payload])
end
