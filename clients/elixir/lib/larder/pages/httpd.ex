defmodule Larder.Pages.HTTPD do
  @moduledoc """
  `Larder.Pages` for an app on OTP's `:httpd` (the post's URL shortener, `Larder.Shortener`): the request of a
  module callback's `mod` record, and `respond/6`, which stores the rendered page when the front's rules allow it
  and gives the callback's `{:proceed, …}` answer. The page is written before the response goes out, so a client
  that has the response can already be served by the front; a store failure is counted in `Larder.Pages.stats/1`
  and never changes the response.
  """

  require Record
  Record.defrecordp(:mod, Record.extract(:mod, from_lib: "inets/include/httpd.hrl"))

  alias Larder.Pages

  @doc "The `Larder.Pages.Request` of an `:httpd` callback's `mod` record (scheme `http`)."
  def request(data) do
    headers = for {n, v} <- mod(data, :parsed_header), do: {to_bin(n), to_bin(v)}

    authority =
      case List.keyfind(headers, "host", 0) do
        {_, host} -> host
        nil -> ""
      end

    %Pages.Request{
      method: to_bin(mod(data, :method)),
      authority: authority,
      target: to_bin(mod(data, :request_uri)),
      headers: headers
    }
  end

  @doc """
  Saves the page (`Larder.Pages.save/6`) and answers `:httpd` with it: `headers` are `{name, value}` binaries,
  sent as given; `started_ms` is when the callback began.
  """
  def respond(%Pages{} = pages, data, status, headers, body, started_ms) do
    _ = Pages.save(pages, request(data), status, headers, body, started_ms)
    response(status, headers, body)
  end

  @doc "The `{:proceed, …}` answer of an `:httpd` callback for this response, without storing it."
  def response(status, headers, body) do
    head =
      [code: status, content_length: Integer.to_charlist(byte_size(body))] ++
        for {n, v} <- headers, do: {String.to_charlist(n), String.to_charlist(v)}

    {:proceed, [response: {:response, head, [body]}]}
  end

  defp to_bin(v) when is_list(v), do: :erlang.list_to_binary(v)
  defp to_bin(v) when is_binary(v), do: v
end
