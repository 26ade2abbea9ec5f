//! HTTP caching semantics, end to end: larder in front of a real origin on loopback.

mod support;

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use support::{cacheable, get, send, Larder, Origin};

#[tokio::test]
async fn a_fresh_response_is_served_from_the_cache_with_its_age() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let first = get(&larder.url("/page"), &[]).await;
    assert_eq!((first.status, first.cache(), first.text().as_str()), (StatusCode::OK, "MISS", "/page #1"));
    larder.clock.advance_ms(5_000);
    let second = get(&larder.url("/page"), &[]).await;
    assert_eq!((second.cache(), second.text().as_str()), ("HIT", "/page #1"));
    assert_eq!(second.header("age"), Some("5"));
    assert_eq!(origin.count("/page"), 1);
    larder.clock.advance_ms(55_000);
    let third = get(&larder.url("/page"), &[]).await;
    assert_eq!((third.cache(), third.text().as_str()), ("MISS", "/page #2"), "stale after max-age");
}

#[tokio::test]
async fn head_is_answered_from_a_cached_get() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    get(&larder.url("/h"), &[]).await;
    let head = send("HEAD", &larder.url("/h"), &[], Bytes::new()).await;
    assert_eq!((head.status, head.cache()), (StatusCode::OK, "HIT"));
    assert_eq!(head.header("content-length"), Some("5"));
    assert!(head.body.is_empty());
    assert_eq!(origin.count("/h"), 1);
}

#[tokio::test]
async fn what_may_not_be_stored_is_fetched_every_time() {
    let origin = Origin::start(|seen| {
        let headers: Vec<(&'static str, String)> = match seen.path.as_str() {
            "/no-store" => vec![("cache-control", "max-age=60, no-store".into())],
            "/private" => vec![("cache-control", "max-age=60, private".into())],
            "/cookie" => vec![("cache-control", "max-age=60".into()), ("set-cookie", "session=1".into())],
            _ => vec![],
        };
        (StatusCode::OK, headers, Bytes::from_static(b"x"))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    for path in ["/no-store", "/private", "/cookie", "/no-freshness"] {
        get(&larder.url(path), &[]).await;
        let again = get(&larder.url(path), &[]).await;
        assert_eq!(again.cache(), "MISS", "{path}");
        assert_eq!(origin.count(path), 2, "{path}");
    }
    let with_cookies = Larder::start(&origin.url(), |c| c.cache.cache_set_cookie = true).await;
    get(&with_cookies.url("/cookie"), &[]).await;
    let hit = get(&with_cookies.url("/cookie"), &[]).await;
    assert_eq!((hit.cache(), hit.header("set-cookie")), ("HIT", Some("session=1")));
}

#[tokio::test]
async fn targeted_fields_address_larder_apart_from_browsers() {
    let origin = Origin::start(|seen| {
        let headers: Vec<(&'static str, String)> = match seen.path.as_str() {
            "/cdn" => vec![("cache-control", "no-store".into()), ("cdn-cache-control", "max-age=60".into())],
            "/surrogate" => vec![("cache-control", "max-age=0".into()), ("surrogate-control", "max-age=60".into())],
            "/s-maxage" => vec![("cache-control", "max-age=600, s-maxage=10".into())],
            _ => vec![],
        };
        (StatusCode::OK, headers, Bytes::from_static(b"x"))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    for path in ["/cdn", "/surrogate", "/s-maxage"] {
        get(&larder.url(path), &[]).await;
        let hit = get(&larder.url(path), &[]).await;
        assert_eq!(hit.cache(), "HIT", "{path}");
    }
    let surrogate = get(&larder.url("/surrogate"), &[]).await;
    assert_eq!(surrogate.header("surrogate-control"), None, "Surrogate-Control is for larder, not browsers");
    larder.clock.advance_ms(11_000);
    assert_eq!(get(&larder.url("/s-maxage"), &[]).await.cache(), "MISS", "s-maxage wins over max-age");
}

#[tokio::test]
async fn vary_keeps_one_entry_per_variant() {
    let origin = Origin::start(|seen| {
        let lang = seen.headers.get("accept-language").and_then(|v| v.to_str().ok()).unwrap_or("none").to_owned();
        (
            StatusCode::OK,
            vec![("cache-control", "max-age=60".into()), ("vary", "Accept-Language".into())],
            Bytes::from(lang),
        )
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    assert_eq!(get(&larder.url("/v"), &[("accept-language", "fr")]).await.text(), "fr");
    assert_eq!(get(&larder.url("/v"), &[("accept-language", "de")]).await.text(), "de");
    let fr = get(&larder.url("/v"), &[("accept-language", "fr")]).await;
    assert_eq!((fr.cache(), fr.text().as_str()), ("HIT", "fr"));
    let none = get(&larder.url("/v"), &[]).await;
    assert_eq!((none.cache(), none.text().as_str()), ("MISS", "none"), "an absent header is its own variant");
    assert_eq!(origin.count("/v"), 3);
}

#[tokio::test]
async fn a_stored_encoding_is_served_only_to_clients_that_accept_it() {
    let html = "<p>hello hello hello hello</p>\n".repeat(200);
    let gzipped =
        larder_format::compress::compress(larder_format::Compressor::Gzip, None, html.as_bytes()).expect("gzip");
    let body = Bytes::from(gzipped);
    let origin = Origin::start(move |_| {
        let headers = vec![
            ("cache-control", "max-age=60".into()),
            ("content-encoding", "gzip".into()),
            ("content-type", "text/html".into()),
            ("etag", "\"v1\"".into()),
        ];
        (StatusCode::OK, headers, body.clone())
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let gzip = get(&larder.url("/z"), &[("accept-encoding", "gzip, br")]).await;
    assert_eq!(gzip.header("content-encoding"), Some("gzip"));
    assert!(gzip.body.starts_with(&[0x1f, 0x8b]));
    let plain = get(&larder.url("/z"), &[]).await;
    assert_eq!((plain.cache(), plain.header("content-encoding")), ("HIT", None));
    assert_eq!(plain.text(), html, "decoded for a client that did not ask for gzip");
    assert_eq!(plain.header("etag"), Some("W/\"v1\""), "a decoded body has a weak tag");
    assert!(plain.header("vary").is_some_and(|v| v.contains("Accept-Encoding")));
    assert_eq!(origin.count("/z"), 1);
}

#[tokio::test]
async fn compressible_pages_can_be_compressed_once_at_store_time() {
    let html = "<li>an item of a long list</li>\n".repeat(300);
    let origin = Origin::start(move |_| {
        (
            StatusCode::OK,
            vec![("cache-control", "max-age=60".into()), ("content-type", "text/html".into())],
            Bytes::from(html.clone()),
        )
    })
    .await;
    let larder = Larder::start(&origin.url(), |c| c.cache.compress = "br".into()).await;
    let plain = get(&larder.url("/c"), &[]).await;
    assert_eq!(plain.header("content-encoding"), None);
    let br = get(&larder.url("/c"), &[("accept-encoding", "br")]).await;
    assert_eq!((br.cache(), br.header("content-encoding")), ("HIT", Some("br")));
    assert!(br.body.len() * 5 < plain.body.len());
}

#[tokio::test]
async fn client_validators_get_304_from_the_cache() {
    let origin = Origin::start(|_| {
        let headers = vec![
            ("cache-control", "max-age=60".into()),
            ("etag", "\"abc\"".into()),
            ("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT".into()),
        ];
        (StatusCode::OK, headers, Bytes::from_static(b"body"))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let first = get(&larder.url("/c"), &[("if-none-match", "\"abc\"")]).await;
    assert_eq!(first.status, StatusCode::NOT_MODIFIED, "answered from the response it just stored");
    let inm = get(&larder.url("/c"), &[("if-none-match", "W/\"abc\"")]).await;
    assert_eq!((inm.status, inm.header("etag")), (StatusCode::NOT_MODIFIED, Some("\"abc\"")));
    let ims = get(&larder.url("/c"), &[("if-modified-since", "Tue, 02 Jan 2024 00:00:00 GMT")]).await;
    assert_eq!(ims.status, StatusCode::NOT_MODIFIED);
    let changed = get(&larder.url("/c"), &[("if-none-match", "\"other\"")]).await;
    assert_eq!((changed.status, changed.text().as_str()), (StatusCode::OK, "body"));
    assert_eq!(origin.count("/c"), 1);
    assert_eq!(
        origin.last("/c").and_then(|s| s.headers.get("if-none-match").cloned()),
        None,
        "fills ask for the whole response"
    );
}

#[tokio::test]
async fn stale_responses_are_revalidated_and_updated_from_a_304() {
    let clock = larder_store::ManualClock::new(larder_format::now_ms());
    let origin = Origin::stamped(clock.clone(), |seen| {
        let matches = seen.headers.get("if-none-match").is_some_and(|v| v == "\"v1\"");
        let status = if matches { StatusCode::NOT_MODIFIED } else { StatusCode::OK };
        let headers = vec![
            ("cache-control", "max-age=10".into()),
            ("etag", "\"v1\"".into()),
            ("x-version", if matches { "updated".into() } else { "first".into() }),
        ];
        (status, headers, if matches { Bytes::new() } else { Bytes::from_static(b"content") })
    })
    .await;
    let larder = Larder::start_at(&origin.url(), clock, |_| {}).await;
    get(&larder.url("/r"), &[]).await;
    larder.clock.advance_ms(20_000);
    let revalidated = get(&larder.url("/r"), &[]).await;
    assert_eq!(revalidated.text(), "content", "the stored body is kept");
    assert_eq!(revalidated.header("x-version"), Some("updated"), "headers come from the 304");
    assert_eq!(
        origin.last("/r").and_then(|s| s.headers.get("if-none-match").cloned()).as_ref().map(|v| v.as_bytes()),
        Some(&b"\"v1\""[..])
    );
    let hit = get(&larder.url("/r"), &[]).await;
    assert_eq!((hit.cache(), hit.header("x-version")), ("HIT", Some("updated")), "fresh again");
    assert_eq!(origin.count("/r"), 2);
}

#[tokio::test]
async fn unsafe_methods_invalidate_the_target_and_its_locations() {
    let origin = Origin::start(|seen| match seen.method.as_str() {
        "POST" => (StatusCode::CREATED, vec![("location", "/items/7".into())], Bytes::new()),
        _ => (StatusCode::OK, vec![("cache-control", "max-age=600".into())], Bytes::from(seen.path.clone())),
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    for path in ["/items", "/items/7", "/other"] {
        get(&larder.url(path), &[]).await;
    }
    let post = send("POST", &larder.url("/items"), &[("content-type", "application/json")], "{}").await;
    assert_eq!((post.status, post.cache()), (StatusCode::CREATED, "BYPASS"));
    assert_eq!(get(&larder.url("/items"), &[]).await.cache(), "MISS");
    assert_eq!(get(&larder.url("/items/7"), &[]).await.cache(), "MISS");
    assert_eq!(get(&larder.url("/other"), &[]).await.cache(), "HIT");
}

#[tokio::test]
async fn keys_ignore_tracking_parameters_and_query_order() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    get(&larder.url("/p?b=2&a=1"), &[]).await;
    assert_eq!(get(&larder.url("/p?a=1&b=2&utm_source=mail&gclid=x"), &[]).await.cache(), "HIT");
    assert_eq!(get(&larder.url("/p?a=1&b=3"), &[]).await.cache(), "MISS");
}

#[tokio::test]
async fn byte_ranges_are_cut_from_a_stored_response() {
    let origin = Origin::start(|_| {
        (StatusCode::OK, vec![("cache-control", "max-age=60".into())], Bytes::from_static(b"0123456789"))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let part = get(&larder.url("/b"), &[("range", "bytes=2-4")]).await;
    assert_eq!((part.status, part.text().as_str()), (StatusCode::PARTIAL_CONTENT, "234"));
    assert_eq!(part.header("content-range"), Some("bytes 2-4/10"));
    let tail = get(&larder.url("/b"), &[("range", "bytes=-3")]).await;
    assert_eq!((tail.cache(), tail.text().as_str()), ("HIT", "789"));
    let none = get(&larder.url("/b"), &[("range", "bytes=20-")]).await;
    assert_eq!(none.status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert!(origin.last("/b").is_some_and(|s| !s.headers.contains_key("range")), "the fill fetched the whole body");
    assert_eq!(origin.count("/b"), 1);
}

#[tokio::test]
async fn requests_with_credentials_are_not_shared() {
    let origin = Origin::start(|seen| {
        let headers = match seen.path.as_str() {
            "/public" => vec![("cache-control", "max-age=60, public".into())],
            // Shared by the field that governs this cache (RFC 9213), not by Cache-Control, which browsers read.
            "/cdn-public" => {
                vec![("cache-control", "max-age=60".into()), ("cdn-cache-control", "max-age=60, public".into())]
            }
            _ => vec![("cache-control", "max-age=60".into())],
        };
        (StatusCode::OK, headers, Bytes::from(seen.path.clone()))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    for _ in 0..2 {
        for path in ["/mine", "/public", "/cdn-public"] {
            get(&larder.url(path), &[("authorization", "Bearer a")]).await;
        }
    }
    assert_eq!(origin.count("/mine"), 2);
    assert_eq!(origin.count("/public"), 1);
    assert_eq!(origin.count("/cdn-public"), 1, "stored and reused by the same field's public");
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test]
async fn http2_cleartext_clients_get_the_same_cache() {
    use http_body_util::{BodyExt, Full};
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=60".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let client: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).http2_only(true).build_http();
    for expected in ["MISS", "HIT"] {
        let request = http::Request::get(larder.url("/h2")).body(Full::new(Bytes::new())).expect("request");
        let response = client.request(request).await.expect("an HTTP/2 response");
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.headers().get("x-cache").map(|v| v.as_bytes()), Some(expected.as_bytes()));
        let body = response.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(body, Bytes::from_static(b"/h2 #1"));
    }
}

#[tokio::test]
async fn accept_encoding_does_not_split_the_cache() {
    let origin = Origin::start(|_| {
        let headers = vec![("cache-control", "max-age=60".into()), ("vary", "Accept-Encoding, Accept-Language".into())];
        (StatusCode::OK, headers, Bytes::from_static(b"page"))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let encodings = ["gzip, deflate, br", "gzip", "br;q=1.0, gzip;q=0.8, *;q=0.1", "identity", ""];
    for (i, accept) in encodings.iter().enumerate() {
        let got = get(&larder.url("/ae"), &[("accept-encoding", accept), ("accept-language", "en")]).await;
        assert_eq!((got.cache(), got.text().as_str()), (if i == 0 { "MISS" } else { "HIT" }, "page"), "{accept:?}");
    }
    assert_eq!(get(&larder.url("/ae"), &[("accept-language", "fr")]).await.cache(), "MISS", "other headers still vary");
    assert_eq!(origin.count("/ae"), 2);
}

#[tokio::test]
async fn an_undecodable_coding_keeps_varying_on_accept_encoding() {
    let origin = Origin::start(|_| {
        let headers = vec![
            ("cache-control", "max-age=60".into()),
            ("vary", "Accept-Encoding".into()),
            ("content-encoding", "deflate".into()),
        ];
        (StatusCode::OK, headers, Bytes::from_static(b"x\x9c+H\x04\x00\x00q\x00q"))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    assert_eq!(get(&larder.url("/d"), &[("accept-encoding", "deflate")]).await.cache(), "MISS");
    assert_eq!(get(&larder.url("/d"), &[("accept-encoding", "deflate")]).await.cache(), "HIT");
    let plain = get(&larder.url("/d"), &[("accept-encoding", "identity")]).await;
    assert_eq!(plain.cache(), "MISS", "deflate bytes must not reach a client that did not accept them");
    assert_eq!(origin.count("/d"), 2);
}

#[tokio::test]
async fn expires_gives_freshness_when_cache_control_does_not() {
    let clock = larder_store::ManualClock::new(larder_format::now_ms());
    let expires_clock = clock.clone();
    let origin = Origin::stamped(clock.clone(), move |_| {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(larder_store::Clock::now_ms(&*expires_clock) + 30_000);
        (StatusCode::OK, vec![("expires", httpdate::fmt_http_date(at))], Bytes::from_static(b"e"))
    })
    .await;
    let larder = Larder::start_at(&origin.url(), clock.clone(), |_| {}).await;
    get(&larder.url("/e"), &[]).await;
    clock.advance_ms(20_000);
    assert_eq!(get(&larder.url("/e"), &[]).await.cache(), "HIT");
    clock.advance_ms(15_000);
    assert_eq!(get(&larder.url("/e"), &[]).await.cache(), "MISS");
}
