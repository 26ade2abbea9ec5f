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

  @doc """
  The `Larder.Pages.Request` of an `:httpd` callback's `mod` record (scheme `http`): the target as the request line
  sent it (`:httpd` rewrites an absolute-form target to its path, which would hide the authority it names), the
  Host field, every header line, and the peer's address (for `trusted_proxies`).
  """
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
      target: target(data),
      headers: headers,
      peer: peer(mod(data, :init_data))
    }
  end

  defp target(data) do
    case data |> mod(:request_line) |> to_bin() |> :binary.split(" ", [:global]) do
      [_method, target, _version] -> target
      _ -> to_bin(mod(data, :request_uri))
    end
  end

  # :httpd's init_data record: {:init_data, {port, address text}, sockname, resolve}.
  defp peer({:init_data, {_port, address}, _, _}) when is_list(address) do
    case :inet.parse_strict_address(address) do
      {:ok, ip} -> ip
      _ -> nil
    end
  end

  defp peer(_), do: nil

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
