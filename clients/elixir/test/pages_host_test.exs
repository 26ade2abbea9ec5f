# Pages an app writes for the front are keyed on the authority the front serves them for (issue 32, finding 7;
# spec/FORMAT.md §5.3): the configured site, else Host; forwarded fields only from trusted proxies; and a request
# reaching the app directly with a Host that is not a plain host[:port], another site's Host, two Hosts, or an
# absolute-form target naming another authority stores nothing (not_stored reason "host"), so it cannot write a page
# the front would then serve to victim.example. Run through a real :httpd app (Larder.Pages.HTTPD) over raw TCP, so
# what :httpd does to a request line or a Host field is part of the test.
defmodule Larder.PagesHostTest do
  # One :httpd app whose page cache lives in :persistent_term: these tests run one at a time.
  use ExUnit.Case, async: false

  alias Larder.{Keys, Pages, Store}
  alias Larder.Pages.Authority
  alias Larder.Stores.File.Scan

  defmodule App do
    @moduledoc false
    # Renders every request as a page the front may keep for a minute, saved through Larder.Pages.HTTPD.
    def unquote(:do)(data) do
      pages = :persistent_term.get({__MODULE__, :pages})
      headers = [{"content-type", "text/plain"} | Pages.front_headers(60)]
      Pages.HTTPD.respond(pages, data, 200, headers, "rendered", System.os_time(:millisecond))
    end
  end

  setup_all do
    dir =
      Path.join(System.tmp_dir!(), "larder-ex-pages-host-#{System.unique_integer([:positive])}")

    {:ok, store} = Larder.Stores.open("file://#{dir}")

    {:ok, httpd} =
      :inets.start(:httpd,
        port: 0,
        bind_address: {127, 0, 0, 1},
        server_name: ~c"larder-pages-host",
        server_root: String.to_charlist(System.tmp_dir!()),
        document_root: String.to_charlist(System.tmp_dir!()),
        modules: [App]
      )

    [port: port] = :httpd.info(httpd, [:port])

    on_exit(fn ->
      :inets.stop(:httpd, httpd)
      File.rm_rf!(dir)
    end)

    %{store: store, dir: dir, port: port}
  end

  # A page cache with `opts` for the app to use; its namespace keeps each test's keys apart.
  defp use_pages(ctx, opts \\ []) do
    namespace = "host#{System.unique_integer([:positive])}"
    {:ok, pages} = Pages.new(ctx.store, [namespace: namespace] ++ opts)
    :persistent_term.put({App, :pages}, pages)
    pages
  end

  # Sends a raw request head to the app: its status (the app answers whatever the page cache does).
  defp send_head(ctx, head) do
    {:ok, s} = :gen_tcp.connect({127, 0, 0, 1}, ctx.port, [:binary, active: false], 2_000)
    :ok = :gen_tcp.send(s, head <> "Connection: close\r\n\r\n")
    reply = read_all(s, "", System.monotonic_time(:millisecond) + 5_000)
    :gen_tcp.close(s)
    "HTTP/1." <> <<_, " ", status::binary-3>> <> _ = reply
    String.to_integer(status)
  end

  defp read_all(s, acc, deadline) do
    case :gen_tcp.recv(s, 0, max(deadline - System.monotonic_time(:millisecond), 1)) do
      {:ok, data} -> read_all(s, acc <> data, deadline)
      _ -> acc
    end
  end

  defp stored?(ctx, pages, scheme, authority, target) do
    key = Keys.http_key("GET", scheme, authority, target, namespace: pages.namespace)
    match?({:ok, _}, Store.get(ctx.store, key))
  end

  defp files(ctx), do: ctx.dir |> Scan.candidates() |> length()

  test "X-Forwarded-Host from a peer that is not a trusted proxy is ignored: the page is keyed on Host",
       ctx do
    pages = use_pages(ctx)

    assert 200 =
             send_head(
               ctx,
               "GET /xfh HTTP/1.1\r\nHost: victim.example\r\nX-Forwarded-Host: evil.example\r\n" <>
                 "X-Forwarded-Proto: https\r\nForwarded: host=evil.example;proto=https\r\n"
             )

    assert stored?(ctx, pages, "http", "victim.example", "/xfh")
    refute stored?(ctx, pages, "http", "evil.example", "/xfh")
    refute stored?(ctx, pages, "https", "evil.example", "/xfh")
    assert Pages.stats(pages)["stored"] == 1
  end

  test "a Host with a path, userinfo, percent, space or a bad port, two Hosts or none: nothing is stored",
       ctx do
    pages = use_pages(ctx)
    before = files(ctx)

    heads = [
      "GET /x HTTP/1.1\r\nHost: victim.example/admin\r\n",
      "GET /x HTTP/1.1\r\nHost: evil@victim.example\r\n",
      "GET /x HTTP/1.1\r\nHost: evil.example/x@victim.example\r\n",
      "GET /x HTTP/1.1\r\nHost: victim.example\\admin\r\n",
      "GET /x HTTP/1.1\r\nHost: victim.example?\r\n",
      "GET /x HTTP/1.1\r\nHost: victim.example#\r\n",
      "GET /x HTTP/1.1\r\nHost: vict%69m.example\r\n",
      "GET /x HTTP/1.1\r\nHost: victim.example evil\r\n",
      "GET /x HTTP/1.1\r\nHost: victim.example:99999\r\n",
      "GET /x HTTP/1.1\r\nHost: victim.example:\r\n",
      "GET /x HTTP/1.1\r\nHost: victim.example:8o\r\n",
      "GET /x HTTP/1.1\r\nHost: [::1\r\n",
      "GET /x HTTP/1.1\r\nHost: [::1]x\r\n",
      "GET /x HTTP/1.1\r\nHost: [victim]\r\n",
      "GET /x HTTP/1.1\r\nHost: victim.example\r\nHost: evil.example\r\n",
      "GET /x HTTP/1.0\r\n"
    ]

    for head <- heads, do: assert(200 = send_head(ctx, head), head)

    refute stored?(ctx, pages, "http", "victim.example", "/admin/x")
    refute stored?(ctx, pages, "http", "victim.example", "/x")
    assert files(ctx) == before
    assert Pages.stats(pages)["host"] == length(heads)
    assert Pages.stats(pages)["stored"] == 0
  end

  test "an absolute-form target stores nothing, whatever its authority and Host (spec/HTTP.md §2 step 2)",
       ctx do
    pages = use_pages(ctx)

    assert 200 =
             send_head(ctx, "GET http://victim.example/abs HTTP/1.1\r\nHost: evil.example\r\n")

    assert 200 =
             send_head(ctx, "GET http://evil.example/abs HTTP/1.1\r\nHost: victim.example\r\n")

    refute stored?(ctx, pages, "http", "victim.example", "/abs")
    refute stored?(ctx, pages, "http", "evil.example", "/abs")
    assert Pages.stats(pages)["host"] == 2

    # Even when the target's authority is the Host's: RFC 9112 §3.2.2 has the server ignore that Host.
    assert 200 =
             send_head(
               ctx,
               "GET http://Victim.Example:80/abs HTTP/1.1\r\nHost: victim.example\r\n"
             )

    refute stored?(ctx, pages, "http", "victim.example", "/abs")
    assert Pages.stats(pages)["host"] == 3

    # A target that is neither a path nor an absolute URL would glue onto the authority in the key.
    request = %Pages.Request{
      method: "GET",
      authority: "victim.example",
      target: ".evil.example/x"
    }

    assert {:not_stored, "host"} =
             Pages.save(pages, request, 200, Pages.front_headers(60), "x", 0)
  end

  test "with a site, a Host naming another name or port stores nothing; the site's own is keyed on the site",
       ctx do
    pages = use_pages(ctx, site: "victim.example:8443")

    for host <- ["victim.example", "victim.example:8444", "other.example:8443", "evil.example"] do
      assert 200 = send_head(ctx, "GET /site HTTP/1.1\r\nHost: #{host}\r\n")
    end

    assert Pages.stats(pages)["host"] == 4
    assert Pages.stats(pages)["stored"] == 0

    assert 200 = send_head(ctx, "GET /site HTTP/1.1\r\nHost: VICTIM.Example:8443\r\n")
    assert stored?(ctx, pages, "http", "victim.example:8443", "/site")

    # The default port is no port.
    pages = use_pages(ctx, site: "victim.example")
    assert 200 = send_head(ctx, "GET /site HTTP/1.1\r\nHost: victim.example:80\r\n")
    assert stored?(ctx, pages, "http", "victim.example", "/site")
  end

  test "a trusted proxy's forwarded host and scheme are the key's; claims that disagree or are not plain store nothing",
       ctx do
    pages = use_pages(ctx, trusted_proxies: ["10.0.0.0/8", "127.0.0.0/8"])

    assert 200 =
             send_head(
               ctx,
               "GET /p HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Host: shop.example\r\nX-Forwarded-Proto: https\r\n"
             )

    assert stored?(ctx, pages, "https", "shop.example", "/p")

    assert 200 =
             send_head(
               ctx,
               "GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nForwarded: for=1.2.3.4;host=\"shop.example:8443\";proto=https\r\n"
             )

    assert stored?(ctx, pages, "https", "shop.example:8443", "/f")

    refused = [
      "GET /d HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Host: a.example\r\nForwarded: host=b.example\r\n",
      "GET /d HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Host: victim.example/admin\r\n",
      "GET /d HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Host: evil@victim.example\r\n",
      "GET /d HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: gopher\r\n"
    ]

    for head <- refused, do: assert(200 = send_head(ctx, head))
    assert Pages.stats(pages)["host"] == length(refused)

    # With a site too, the forwarded host must be the site.
    pages = use_pages(ctx, site: "shop.example", trusted_proxies: ["127.0.0.1"])

    assert 200 =
             send_head(
               ctx,
               "GET /s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Host: evil.example\r\n"
             )

    assert Pages.stats(pages)["host"] == 1

    assert 200 =
             send_head(
               ctx,
               "GET /s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Host: shop.example\r\n"
             )

    assert stored?(ctx, pages, "http", "shop.example", "/s")

    # A proxy list that does not hold the peer: its fields are nobody's.
    pages = use_pages(ctx, trusted_proxies: ["10.0.0.0/8", "::1"])

    assert 200 =
             send_head(
               ctx,
               "GET /u HTTP/1.1\r\nHost: victim.example\r\nX-Forwarded-Host: evil.example\r\n"
             )

    assert stored?(ctx, pages, "http", "victim.example", "/u")
    refute stored?(ctx, pages, "http", "evil.example", "/u")
  end

  test "the scheme option is the key's scheme, before a trusted proxy's and the connection's",
       ctx do
    pages = use_pages(ctx, scheme: "https")
    assert 200 = send_head(ctx, "GET /sch HTTP/1.1\r\nHost: shop.example\r\n")
    assert stored?(ctx, pages, "https", "shop.example", "/sch")
    refute stored?(ctx, pages, "http", "shop.example", "/sch")

    # Host's default port is the option's scheme's: 443 goes, 80 stays.
    assert 200 = send_head(ctx, "GET /443 HTTP/1.1\r\nHost: shop.example:443\r\n")
    assert stored?(ctx, pages, "https", "shop.example", "/443")

    pages = use_pages(ctx, scheme: "http", trusted_proxies: ["127.0.0.1"])

    assert 200 =
             send_head(
               ctx,
               "GET /x HTTP/1.1\r\nHost: shop.example\r\nX-Forwarded-Proto: https\r\n"
             )

    assert stored?(ctx, pages, "http", "shop.example", "/x")
    refute stored?(ctx, pages, "https", "shop.example", "/x")

    for bad <- ["ftp", "HTTPS ", :https] do
      assert_raise ArgumentError, fn -> Pages.new(ctx.store, scheme: bad) end
    end
  end

  test "trusted_proxies and site are checked; IPv4-mapped peers count as IPv4" do
    nets = Authority.networks(["10.0.0.0/8", "fd00::/8", "192.0.2.7"])
    assert Authority.trusted?(nets, {10, 1, 2, 3})
    assert Authority.trusted?(nets, {0, 0, 0, 0, 0, 0xFFFF, 0x0A01, 0x0203})
    assert Authority.trusted?(nets, "fd12::1")
    assert Authority.trusted?(nets, {192, 0, 2, 7})
    refute Authority.trusted?(nets, {192, 0, 2, 8})
    refute Authority.trusted?(nets, {127, 0, 0, 1})
    refute Authority.trusted?(nets, nil)
    refute Authority.trusted?([], {10, 0, 0, 1})

    {:ok, store} = Larder.Stores.open("file://#{System.tmp_dir!()}/larder-ex-pages-opts")

    for bad <- [["10.0.0.0/33"], ["proxy.example"], "10.0.0.0/8", [:x]] do
      assert_raise ArgumentError, fn -> Pages.new(store, trusted_proxies: bad) end
    end

    for bad <- ["victim.example/admin", "evil@victim.example", "victim.example:99999", ""] do
      assert_raise ArgumentError, fn -> Pages.new(store, site: bad) end
    end
  end
end
