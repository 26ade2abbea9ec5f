//! An attacker's view of the front: request smuggling, cache poisoning through the key, the Host, hop-by-hop and
//! forwarding fields, and tracking parameters, and requests that are simply malformed. Each test runs larder in
//! front of a real origin on loopback that logs the bytes it receives (support/raw.rs). docs/security.md lists
//! these threats and points at the tests.

mod support;

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use support::raw::{exchange, ok, RawOrigin, RawRequest};
use support::{get, send, Larder};

/// An origin that answers every request with a cacheable page naming its target and the Host it was sent.
async fn reflecting_origin() -> RawOrigin {
    RawOrigin::start(|request: &RawRequest| {
        let body = format!("{} host={}", request.target, request.header("host").unwrap_or("-"));
        ok(&[("cache-control", "max-age=600")], body.as_bytes())
    })
    .await
}

const QUIET: Duration = Duration::from_millis(700);

#[tokio::test]
async fn a_get_with_a_body_cannot_desync_the_shared_upstream_connection() {
    let origin = reflecting_origin().await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let smuggled = "GET /poison HTTP/1.1\r\nHost: shop.example\r\n\r\n";
    for framing in [format!("Content-Length: {}", smuggled.len()), "Transfer-Encoding: chunked".to_owned()] {
        let body = if framing.starts_with("Transfer") {
            format!("{:x}\r\n{smuggled}\r\n0\r\n\r\n", smuggled.len())
        } else {
            smuggled.to_owned()
        };
        for method in ["GET", "HEAD"] {
            let attack = format!("{method} /a HTTP/1.1\r\nHost: shop.example\r\n{framing}\r\n\r\n{body}");
            let answer = exchange(larder.addr, attack.as_bytes(), QUIET).await;
            assert!(answer.starts_with("HTTP/1.1 400"), "{method} with {framing}: {answer}");
        }
    }
    // Whoever comes next gets their own page, from a request the origin framed as exactly what was sent.
    let victim = get(&larder.url("/victim"), &[("host", "shop.example")]).await;
    assert_eq!(victim.text(), "/victim host=shop.example");
    assert_eq!(origin.targets(), ["/victim"], "nothing else reached the origin");
    assert!(!origin.received_lowercase().contains("content-length"), "a GET goes upstream without framing fields");
    assert_eq!(get(&larder.url("/poison"), &[("host", "shop.example")]).await.cache(), "MISS", "nothing was poisoned");
}

#[tokio::test]
async fn request_bodies_go_upstream_with_framing_that_describes_exactly_them() {
    let origin = RawOrigin::start(|request: &RawRequest| ok(&[], &request.body)).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let sized = send("POST", &larder.url("/sized"), &[("content-length", "5")], "hello").await;
    assert_eq!(sized.text(), "hello");
    let chunked =
        "POST /chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    let answer = exchange(larder.addr, chunked.as_bytes(), QUIET).await;
    assert!(answer.ends_with("abcde"), "{answer}");
    let requests = origin.requests();
    assert_eq!(requests[0].header("content-length"), Some("5"));
    assert_eq!(requests[0].body, b"hello");
    assert_eq!(requests[1].body, b"abcde");
    assert!(requests.iter().all(|r| r.all("content-length").len() + r.all("transfer-encoding").len() == 1));
}

#[tokio::test]
async fn a_smuggling_sequence_on_one_client_connection_reaches_the_app_as_one_request() {
    let origin = reflecting_origin().await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    // Both framings: Transfer-Encoding wins (RFC 9112 §6.3), the rest is read as a second request, and the
    // connection must be closed after the first answer so that second request is never served.
    let attack = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n";
    let answer = exchange(larder.addr, attack.as_bytes(), QUIET).await;
    assert_eq!(answer.matches("HTTP/1.1").count(), 1, "one answer, then the connection closes: {answer}");
    for conflicting in ["Content-Length: 5\r\nContent-Length: 6", "Transfer-Encoding: gzip"] {
        let request = format!("POST /y HTTP/1.1\r\nHost: a\r\n{conflicting}\r\n\r\nhello");
        assert!(exchange(larder.addr, request.as_bytes(), QUIET).await.starts_with("HTTP/1.1 400"), "{conflicting}");
    }
    assert_eq!(origin.targets(), ["/x"], "the smuggled request never reached the app");
    assert!(origin.requests()[0].body.is_empty());
}

#[tokio::test]
async fn hosts_that_are_not_a_plain_authority_are_refused() {
    let origin = reflecting_origin().await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    for head in [
        "GET /b HTTP/1.1\r\nHost: victim/a\r\n",
        "GET / HTTP/1.1\r\nHost: evil.example/x@victim.example\r\n",
        "GET / HTTP/1.1\r\nHost: victim.example\r\nHost: evil.example\r\n",
        "GET / HTTP/1.1\r\n",
        "GET / HTTP/1.1\r\nHost: user@victim.example\r\n",
        "GET / HTTP/1.1\r\nHost: victim.example:99999\r\n",
    ] {
        let answer = exchange(larder.addr, format!("{head}\r\n").as_bytes(), QUIET).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{head:?}: {answer}");
    }
    assert!(origin.targets().is_empty());
    // Before, `Host: victim/a` + `/b` and `Host: victim` + `/a/b` shared a key.
    get(&larder.url("/a/b"), &[("host", "victim")]).await;
    assert_eq!(origin.targets(), ["/a/b"]);
}

#[tokio::test]
async fn an_absolute_target_names_the_host_the_app_is_asked_for() {
    let origin = reflecting_origin().await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let absolute = "GET http://real.example/x HTTP/1.1\r\nHost: other.example\r\n\r\n";
    let answer = exchange(larder.addr, absolute.as_bytes(), QUIET).await;
    assert!(answer.ends_with("/x host=real.example"), "{answer}");
    let same = get(&larder.url("/x"), &[("host", "real.example")]).await;
    assert_eq!((same.cache(), same.text().as_str()), ("HIT", "/x host=real.example"));
    let other = get(&larder.url("/x"), &[("host", "other.example")]).await;
    assert_eq!((other.cache(), other.text().as_str()), ("MISS", "/x host=other.example"));
}

#[tokio::test]
async fn an_http2_request_is_keyed_on_the_authority_the_app_is_sent() {
    use http_body_util::{BodyExt, Full};
    let origin = reflecting_origin().await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let client: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).http2_only(true).build_http();
    let request = http::Request::get(larder.url("/h2")).body(Full::new(Bytes::new())).expect("request");
    let response = client.request(request).await.expect("an HTTP/2 response");
    let body = response.into_body().collect().await.expect("body").to_bytes();
    let authority = larder.addr.to_string();
    assert_eq!(
        body,
        Bytes::from(format!("/h2 host={authority}")),
        "the app is asked for the :authority larder keyed on"
    );
    let h1 = get(&larder.url("/h2"), &[]).await;
    assert_eq!(h1.cache(), "HIT", "HTTP/1.1 with the same Host shares the entry");
}

#[tokio::test]
async fn what_connection_names_is_neither_forwarded_nor_varied_on() {
    let origin = RawOrigin::start(|request: &RawRequest| {
        let user = request.header("cookie").unwrap_or("anonymous").to_owned();
        ok(&[("cache-control", "max-age=600"), ("vary", "Cookie")], user.as_bytes())
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    // The attacker names its cookie in Connection: larder strips the cookie before forwarding, so the app
    // renders an anonymous page. That page must not be stored as the variant for alice's cookie.
    let attack = get(&larder.url("/home"), &[("cookie", "user=alice"), ("connection", "cookie")]).await;
    assert_eq!(attack.text(), "anonymous");
    let alice = get(&larder.url("/home"), &[("cookie", "user=alice")]).await;
    assert_eq!(alice.text(), "user=alice", "alice gets her own page, not the anonymous one");
    // `Connection: host` cannot take the Host away from what the app is sent.
    get(&larder.url("/h"), &[("connection", "host, x-a"), ("x-a", "1")]).await;
    let sent = origin.requests().into_iter().find(|r| r.target == "/h").expect("sent");
    assert_eq!(sent.header("host"), Some(larder.addr.to_string().as_str()));
    assert_eq!(sent.header("x-a"), None);
}

#[tokio::test]
async fn client_forwarding_fields_never_reach_the_app_unless_from_a_trusted_proxy() {
    let origin = RawOrigin::start(|request: &RawRequest| {
        let seen = [
            "x-forwarded-host",
            "x-forwarded-proto",
            "forwarded",
            "x-original-url",
            "x-rewrite-url",
            "x-forwarded-for",
        ]
        .iter()
        .map(|n| format!("{n}={}", request.header(n).unwrap_or("-")))
        .collect::<Vec<_>>()
        .join("\n");
        ok(&[("cache-control", "max-age=600")], seen.as_bytes())
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let host = larder.addr.to_string();
    let poisoned = get(
        &larder.url("/page"),
        &[
            ("x-forwarded-host", "evil.example"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "host=evil.example;proto=https"),
            ("x-original-url", "/admin"),
            ("x-rewrite-url", "/admin"),
            ("x-forwarded-for", "1.2.3.4"),
        ],
    )
    .await;
    let expected = format!(
        "x-forwarded-host={host}\nx-forwarded-proto=http\nforwarded=for=127.0.0.1;host=\"{host}\";proto=http\n\
         x-original-url=-\nx-rewrite-url=-\nx-forwarded-for=127.0.0.1"
    );
    assert_eq!(poisoned.text(), expected, "larder sets the forwarding fields from what it knows");
    assert_eq!(get(&larder.url("/page"), &[]).await.text(), expected, "so the stored page is the clean one");

    let behind_a_proxy = Larder::start(&origin.url(), |c| c.trusted_proxies = vec!["127.0.0.0/8".into()]).await;
    let via_proxy = get(
        &behind_a_proxy.url("/t"),
        &[("x-forwarded-host", "shop.example"), ("x-forwarded-proto", "https"), ("x-forwarded-for", "203.0.113.7")],
    )
    .await;
    assert!(
        via_proxy.text().contains("x-forwarded-host=shop.example\nx-forwarded-proto=https"),
        "{}",
        via_proxy.text()
    );
    assert!(via_proxy.text().contains("x-forwarded-for=203.0.113.7, 127.0.0.1"), "{}", via_proxy.text());
    let key = behind_a_proxy.proxy.url_key("https", "shop.example", "/t");
    let stored = behind_a_proxy.proxy.storage().read_entry(&key).await.expect("read");
    assert!(stored.is_some(), "keyed on the scheme and host the proxy forwarded");
    let conflicting =
        get(&behind_a_proxy.url("/t"), &[("x-forwarded-host", "a.example"), ("forwarded", "host=b.example")]).await;
    assert_eq!(conflicting.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn dropped_tracking_parameters_are_not_forwarded_either() {
    let origin = reflecting_origin().await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let reflected = get(&larder.url("/p?utm_source=%3Cscript%3E&b=2&a=1"), &[("host", "shop.example")]).await;
    assert_eq!(reflected.text(), "/p?a=1&b=2 host=shop.example");
    let clean = get(&larder.url("/p?a=1&b=2"), &[("host", "shop.example")]).await;
    assert_eq!((clean.cache(), clean.text().as_str()), ("HIT", "/p?a=1&b=2 host=shop.example"));
    // An app that splits the query on `;` too must not see a second callback hidden in a dropped parameter.
    get(&larder.url("/jsonp?callback=safe&utm_source=x;callback=evil"), &[("host", "shop.example")]).await;
    assert!(origin.targets().contains(&"/jsonp?callback=safe".to_owned()), "{:?}", origin.targets());
    assert!(!origin.received_lowercase().contains("evil"));
}

#[tokio::test]
async fn malformed_and_unsupported_requests_get_clear_answers() {
    let origin = reflecting_origin().await;
    let larder = Larder::start(&origin.url(), |c| c.limits.max_request_body_bytes = 1000).await;
    let answer = |text: &'static str| exchange(larder.addr, text.as_bytes(), QUIET);
    let gzip_chunked = answer("POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n").await;
    assert!(gzip_chunked.starts_with("HTTP/1.1 501"), "{gzip_chunked}");
    let bad_chunk =
        answer("POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n").await;
    assert!(bad_chunk.starts_with("HTTP/1.1 400"), "{bad_chunk}");
    assert_eq!(larder.proxy.metrics().upstream_errors.load(std::sync::atomic::Ordering::SeqCst), 0);
    let options = answer("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert!(options.starts_with("HTTP/1.1 200") && options.to_ascii_lowercase().contains("allow: get"), "{options}");
    let connect = answer("CONNECT victim.example:443 HTTP/1.1\r\nHost: victim.example:443\r\n\r\nhello").await;
    assert!(connect.starts_with("HTTP/1.1 405"), "{connect}");
    let big = format!("{:x}\r\n{}\r\n0\r\n\r\n", 1500, "y".repeat(1500));
    let too_big = exchange(
        larder.addr,
        format!("POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n{big}").as_bytes(),
        QUIET,
    )
    .await;
    assert!(too_big.starts_with("HTTP/1.1 413") && too_big.contains("1000-byte limit"), "names the limit: {too_big}");
    assert!(origin.targets().iter().all(|t| t == "/u"), "nothing else reached the app: {:?}", origin.targets());
}

#[tokio::test]
async fn the_admin_token_scheme_is_case_insensitive() {
    let origin = reflecting_origin().await;
    let larder = Larder::start(&origin.url(), |c| c.admin_token = Some("s3cret".into())).await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let authorization = format!("{scheme} s3cret");
        let got = get(&larder.admin_url("/metrics"), &[("authorization", authorization.as_str())]).await;
        assert_eq!(got.status, StatusCode::OK, "{scheme}");
    }
    assert_eq!(
        get(&larder.admin_url("/metrics"), &[("authorization", "bearer nope")]).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn an_upstream_url_with_a_path_is_a_prefix() {
    let origin = reflecting_origin().await;
    let larder = Larder::start(&format!("{}/shop/", origin.url()), |_| {}).await;
    assert!(get(&larder.url("/p?x=1"), &[("host", "a")]).await.text().starts_with("/shop/p?x=1"));
}
