# Pages written by the Elixir app are served by the Rust front: the post's URL shortener (Larder.Shortener on
# :httpd) with Larder.Pages, and `larder serve --store memcached://…` in front of it (LARDER_BIN). A page the app
# rendered for a request that never went through larder is served by larder without reaching Elixir (the app counts
# its renders); a tag purge from Elixir makes it render again; Python (the repository's .venv) reads the page Elixir
# wrote; a varying page is found by the front under the variant key Elixir chose; what the front's rules refuse is
# not written, and a store that fails is counted, never raised.
defmodule Larder.PagesTest do
  # The shortener is one :httpd app per node (its settings are in :persistent_term): these tests run alone.
  use ExUnit.Case, async: false

  alias Larder.{Entry, Pages, Response, Shortener, Store, TestServers}

  @root Path.expand("../../..", __DIR__)
  @python Path.join(@root, ".venv/bin/python")

  setup_all do
    bin = System.get_env("LARDER_BIN") || Path.join(@root, "target/debug/larder")
    unless File.exists?(bin), do: flunk("#{bin} is missing: cargo build -p larder-cli")
    store_url = "memcached://#{Application.fetch_env!(:larder, :test_memcached)}?timeout=2s"
    namespace = "ex-pages-#{System.unique_integer([:positive])}"
    {:ok, pages} = Pages.new(store_url, namespace: namespace)

    Shortener.DB.start(2, 1)
    {:ok, app, app_port} = Shortener.start(pages: pages, ttl: 60)
    front_port = TestServers.free_port()

    front =
      TestServers.larder_serve(
        bin,
        ~w(--upstream http://127.0.0.1:#{app_port} --listen 127.0.0.1:#{front_port}
           --admin 127.0.0.1:#{TestServers.free_port()} --admin-no-token --store #{store_url}
           --namespace #{namespace}),
        front_port
      )

    on_exit(fn ->
      TestServers.stop(front, front_port)
      Shortener.stop(app)
    end)

    %{pages: pages, app_port: app_port, front_port: front_port, store_url: store_url}
  end

  defp get(port, path, headers \\ []) do
    {:ok, s} = :gen_tcp.connect({127, 0, 0, 1}, port, [:binary, active: false], 2_000)
    lines = Enum.map(headers, fn {n, v} -> "#{n}: #{v}\r\n" end)

    :ok =
      :gen_tcp.send(s, [
        "GET #{path} HTTP/1.1\r\n",
        lines,
        if(List.keymember?(headers, "host", 0), do: [], else: "host: 127.0.0.1:#{port}\r\n"),
        "connection: close\r\n\r\n"
      ])

    reply = read_all(s, "", System.monotonic_time(:millisecond) + 5_000)
    [head, body] = :binary.split(reply, "\r\n\r\n")
    ["HTTP/1.1 " <> <<status::binary-3>> <> _ | fields] = String.split(head, "\r\n")

    parsed =
      for f <- fields, [n, v] = :binary.split(f, ":"), do: {String.downcase(n), String.trim(v)}

    {String.to_integer(status), parsed, body}
  end

  defp read_all(s, acc, deadline) do
    left = deadline - System.monotonic_time(:millisecond)
    if left <= 0, do: flunk("no complete reply within 5 s")

    case :gen_tcp.recv(s, 0, left) do
      {:ok, data} -> read_all(s, acc <> data, deadline)
      {:error, :closed} -> acc
      {:error, e} -> flunk("reading the reply: #{inspect(e)}")
    end
  end

  defp header(fields, name), do: Enum.find_value(fields, fn {n, v} -> if n == name, do: v end)

  defp python(args) do
    unless File.exists?(@python),
      do: flunk("#{@python} is missing: run make venv at the repository root")

    script = """
    import json, sys
    from larder import decode
    from larder.stores import open_store
    e = decode(open_store(sys.argv[1]).get(sys.argv[2]))
    print(json.dumps({"status": e.value.status, "location": dict(e.value.headers).get(b"location", b"").decode(),
                      "names": sorted({n.decode() for n, _ in e.value.headers}), "tags": list(e.tags)}))
    """

    # stdout only: a warning on stderr is the interpreter's business, not part of the answer.
    {out, 0} =
      System.cmd(@python, ["-c", script | args],
        env: [{"PYTHONPATH", Path.join(@root, "clients/python/src")}]
      )

    Larder.JSON.decode!(out)
  end

  test "a page the Elixir app wrote is served by the front without reaching Elixir; Python reads it; a tag purge from Elixir makes the app render again",
       ctx do
    slug = "s#{System.unique_integer([:positive])}"
    front = "127.0.0.1:#{ctx.front_port}"
    before = Shortener.renders()
    stored = Pages.stats(ctx.pages)["stored"]

    # Straight to the app, as the front would send it (Host is the front's): rendered once, written by Larder.Pages.
    {302, direct, ""} = get(ctx.app_port, "/#{slug}", [{"host", front}])
    assert header(direct, "location") == "http://www.example.com/#{slug}"
    assert header(direct, "surrogate-key") == "links link-#{slug}"
    assert Shortener.renders() == before + 1
    assert Pages.stats(ctx.pages)["stored"] == stored + 1

    for _ <- 1..3 do
      {302, served, _} = get(ctx.front_port, "/#{slug}")
      assert header(served, "location") == "http://www.example.com/#{slug}"
      assert header(served, "x-cache") =~ ~r/^HIT/
      refute header(served, "surrogate-control")
    end

    assert Shortener.renders() == before + 1, "the front asked the Elixir app again"

    {:ok, key} =
      Pages.key(ctx.pages, %Pages.Request{method: "GET", authority: front, target: "/#{slug}"})

    assert key == "#{ctx.pages.namespace}:GET:http://#{front}/#{slug}"

    read = python([ctx.store_url, key])
    assert read["status"] == 302
    assert read["location"] == "http://www.example.com/#{slug}"
    assert read["tags"] == ["link-#{slug}", "links"]
    assert "age" in read["names"] and "date" in read["names"]

    refute Enum.any?(
             read["names"],
             &(&1 in ["surrogate-control", "surrogate-key", "content-length"])
           )

    # memcached's purge records hide what was written in the same second as the purge (spec/STORES.md).
    Process.sleep(1_100)
    assert {:ok, _} = Pages.purge_tag(ctx.pages, "link-#{slug}")

    assert :miss ==
             Pages.find(ctx.pages, %Pages.Request{
               method: "GET",
               authority: front,
               target: "/#{slug}"
             })

    {302, again, _} = get(ctx.front_port, "/#{slug}")
    assert header(again, "location") == "http://www.example.com/#{slug}"
    assert Shortener.renders() == before + 2
  end

  test "a varying page goes under the variant key the front looks up, behind a marker", ctx do
    path = "/v#{System.unique_integer([:positive])}"
    front = "127.0.0.1:#{ctx.front_port}"

    headers = [
      {"Vary", "Accept-Language"},
      {"Content-Type", "text/plain"} | Pages.front_headers(60)
    ]

    for {lang, body} <- [{"fr", "bonjour"}, {"de", "hallo"}] do
      request = %Pages.Request{
        method: "GET",
        authority: front,
        target: path,
        headers: [{"Accept-Language", lang}]
      }

      assert {:ok, key} = Pages.save(ctx.pages, request, 200, headers, body, Store.now_ms())
      assert {:ok, base} = Pages.key(ctx.pages, request)
      assert key != base
      assert {:ok, ^key, %Entry{value: %Response{body: ^body}}} = Pages.find(ctx.pages, request)
    end

    before = Shortener.renders()

    for {lang, body} <- [{"fr", "bonjour"}, {"de", "hallo"}, {"fr", "bonjour"}] do
      {200, served, ^body} = get(ctx.front_port, path, [{"accept-language", lang}])
      assert header(served, "x-cache") =~ ~r/^HIT/
    end

    assert Shortener.renders() == before
  end

  test "what the front's rules refuse is not written; a failing store is counted, not raised",
       ctx do
    request = %Pages.Request{method: "GET", authority: "example.test", target: "/refused"}
    ok = Pages.front_headers(60)
    now = Store.now_ms()

    assert {:not_stored, "set-cookie"} =
             Pages.save(ctx.pages, request, 200, [{"Set-Cookie", "a=1"} | ok], "x", now)

    assert {:not_stored, "private"} =
             Pages.save(
               ctx.pages,
               request,
               200,
               [{"Cache-Control", "private, max-age=60"}],
               "x",
               now
             )

    assert {:not_stored, "no-explicit-freshness"} =
             Pages.save(ctx.pages, request, 200, [], "x", now)

    assert {:not_stored, "method"} =
             Pages.save(ctx.pages, %{request | method: "POST"}, 200, ok, "x", now)

    {:ok, small} = Pages.new(ctx.pages.store, max_body: 4, namespace: ctx.pages.namespace)
    assert {:not_stored, "too-large"} = Pages.save(small, request, 200, ok, "12345", now)
    assert :miss == Pages.find(ctx.pages, request)

    dead_port = TestServers.free_port()
    {:ok, dead} = Pages.new("memcached://127.0.0.1:#{dead_port}?timeout=500ms")
    assert {:error, _} = Pages.save(dead, request, 200, ok, "x", now)
    assert Pages.stats(dead)["errors"] == 1
    assert Pages.stats(dead)["stored"] == 0
  end

  test "front_headers refuses what would make a wrong header" do
    assert Pages.front_headers(30, tags: ["a", "b"], stale_if_error: 5) == [
             {"surrogate-control", "max-age=30, stale-if-error=5"},
             {"surrogate-key", "a b"}
           ]

    for bad <- [0, -1, 1.5, "60"],
        do: assert_raise(ArgumentError, fn -> Pages.front_headers(bad) end)

    for tag <- ["", "a b", "a,b", "a\r\nx: y", :atom],
        do: assert_raise(ArgumentError, fn -> Pages.front_headers(60, tags: [tag]) end)
  end
end
