defmodule Larder.Shortener do
  @moduledoc """
  The post's URL shortener (source document 004), rebuilt on OTP's `:httpd` (Phoenix is not packaged): `GET
  /<slug>` redirects (302) to the link's long URL, looked up through `Larder.Cache.fetch/4` with the database
  query as the fallback (`Larder.Shortener.DB`, a stand-in with a few slow connections). With `cache: nil` every
  request queries it, the post's "DB read" configuration. `bench/post_004.exs` measures both under 500
  concurrent users.

  With `pages:` (a `Larder.Pages`), each redirect also opts in to larder's front for `ttl` seconds (default 60),
  tagged `links` and `link-<slug>`, and is written into the shared store as the front would store it
  (`Larder.Pages.HTTPD`), so `larder serve --store …` in front answers it without the app. `renders/0` counts
  the responses the app made.

      Larder.Shortener.DB.start(10, 5)
      {:ok, pid, port} = Larder.Shortener.start(cache: MyCache)
  """

  require Record
  Record.defrecordp(:mod, Record.extract(:mod, from_lib: "inets/include/httpd.hrl"))

  @doc "Starts the server on a free loopback port: `{:ok, pid, port}`."
  def start(opts) do
    :persistent_term.put(
      {__MODULE__, :config},
      {Keyword.get(opts, :cache), Keyword.get(opts, :pages), Keyword.get(opts, :ttl, 60)}
    )

    :persistent_term.put({__MODULE__, :renders}, :counters.new(1, [:write_concurrency]))

    dir = Path.join(System.tmp_dir!(), "larder-shortener")
    File.mkdir_p!(dir)

    {:ok, pid} =
      :inets.start(:httpd,
        port: Keyword.get(opts, :port, 0),
        bind_address: {127, 0, 0, 1},
        server_name: ~c"larder-shortener",
        server_root: String.to_charlist(dir),
        document_root: String.to_charlist(dir),
        modules: [__MODULE__],
        max_clients: 2000,
        keep_alive: true,
        max_keep_alive_request: 1_000_000_000,
        keep_alive_timeout: 60
      )

    [port: port] = :httpd.info(pid, [:port])
    {:ok, pid, port}
  end

  @doc "Stops the server."
  def stop(pid), do: :inets.stop(:httpd, pid)

  @doc "How many responses the app rendered since it started."
  def renders, do: :counters.get(:persistent_term.get({__MODULE__, :renders}), 1)

  @doc false
  # :httpd's module callback.
  def unquote(:do)(data) do
    started = System.os_time(:millisecond)
    {cache, pages, ttl} = :persistent_term.get({__MODULE__, :config})
    :counters.add(:persistent_term.get({__MODULE__, :renders}), 1, 1)
    "/" <> slug = data |> mod(:request_uri) |> to_string()

    link =
      if cache,
        do:
          Larder.Cache.fetch(cache, "link:" <> slug, fn -> Larder.Shortener.DB.by_slug(slug) end),
        else: Larder.Shortener.DB.by_slug(slug)

    if pages do
      headers =
        [{"location", link["long_url"]}] ++
          Larder.Pages.front_headers(ttl, tags: ["links" | slug_tag(slug)])

      Larder.Pages.HTTPD.respond(pages, data, 302, headers, "", started)
    else
      headers = [code: 302, location: String.to_charlist(link["long_url"]), content_length: ~c"0"]
      {:proceed, [response: {:response, headers, []}]}
    end
  end

  # A tag names one link when its slug is a plain word (a tag has no spaces or commas).
  defp slug_tag(slug),
    do: if(Regex.match?(~r/\A[A-Za-z0-9_-]{1,100}\z/, slug), do: ["link-" <> slug], else: [])
end
