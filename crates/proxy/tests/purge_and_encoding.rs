//! Purges that remove everything they name (every variant and coding of a URL, URL prefixes, several tags), and
//! say so when they remove nothing; and codings: every client gets the best coding it accepts, whoever asked
//! first, and never one it did not ask for.

mod support;

use bytes::Bytes;
use http::StatusCode;
use larder_format::{encode_response, encode_value, ContentEncoding, EncodeOptions, EntryMeta, HttpResponse};
use support::{cacheable, get, send, Larder, Origin};

fn escaped(key: &str) -> String {
    key.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

async fn purge(larder: &Larder, body: String) -> serde_json::Value {
    let answer = send("POST", &larder.admin_url("/purge"), &[("content-type", "application/json")], body).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    serde_json::from_slice(&answer.body).expect("JSON")
}

#[tokio::test]
async fn a_url_purge_removes_every_variant() {
    let origin = Origin::start(|seen| {
        let lang = seen.headers.get("accept-language").and_then(|v| v.to_str().ok()).unwrap_or("none").to_owned();
        let n = seen.headers.get("x-round").and_then(|v| v.to_str().ok()).unwrap_or("1").to_owned();
        let headers = vec![("cache-control", "max-age=600".into()), ("vary", "Accept-Language".into())];
        (StatusCode::OK, headers, Bytes::from(format!("{lang} v{n}")))
    })
    .await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    for lang in ["de", "fr"] {
        get(&larder.url("/page"), &[("accept-language", lang)]).await;
        assert_eq!(get(&larder.url("/page"), &[("accept-language", lang)]).await.cache(), "HIT");
    }
    // Each way of purging a URL: PURGE, the admin API, and an invalidating POST.
    let url = format!("http://{}/page", larder.addr);
    for round in ["2", "3", "4"] {
        match round {
            "2" => assert_eq!(send("PURGE", &larder.url("/page"), &[], Bytes::new()).await.status, StatusCode::OK),
            "3" => assert!(purge(&larder, format!(r#"{{"url":"{url}"}}"#)).await["purged"].as_u64() >= Some(1)),
            _ => assert_eq!(send("POST", &larder.url("/page"), &[], "x").await.status, StatusCode::OK),
        }
        let de = get(&larder.url("/page"), &[("accept-language", "de"), ("x-round", round)]).await;
        assert_eq!((de.cache(), de.text()), ("MISS", format!("de v{round}")));
        let fr = get(&larder.url("/page"), &[("accept-language", "fr"), ("x-round", round)]).await;
        assert_eq!((fr.cache(), fr.text()), ("MISS", format!("fr v{round}")), "the other variant went too");
        assert_eq!(get(&larder.url("/page"), &[("accept-language", "fr")]).await.cache(), "HIT", "and comes back");
    }
}

#[tokio::test]
async fn whoever_asks_first_every_client_gets_the_best_coding_it_accepts() {
    let html = "<li>an item of a long list</li>\n".repeat(300);
    // An app that compresses only for clients that ask, as most do.
    let origin = Origin::start(move |seen| {
        let gzip =
            seen.headers.get("accept-encoding").and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("gzip"));
        let mut headers = vec![
            ("cache-control", "max-age=600".into()),
            ("content-type", "text/html".into()),
            ("vary", "Accept-Encoding".into()),
            ("etag", "\"p1\"".into()),
        ];
        let body = if gzip {
            headers.push(("content-encoding", "gzip".into()));
            larder_format::compress::compress(larder_format::Compressor::Gzip, None, html.as_bytes()).expect("gzip")
        } else {
            html.clone().into_bytes()
        };
        (StatusCode::OK, headers, Bytes::from(body))
    })
    .await;
    let expected = "<li>an item of a long list</li>\n".repeat(300);
    for first in [None, Some("gzip, br")] {
        let larder = Larder::start(&origin.url(), |_| {}).await;
        let path = "/p";
        let ask = |accept: Option<&'static str>| {
            let url = larder.url(path);
            async move {
                let headers: Vec<(&str, &str)> = accept.map(|a| vec![("accept-encoding", a)]).unwrap_or_default();
                get(&url, &headers).await
            }
        };
        ask(first).await;
        let gzip = ask(Some("gzip, deflate, br")).await;
        assert_eq!((gzip.cache(), gzip.header("content-encoding")), ("HIT", Some("gzip")), "first: {first:?}");
        let decoded = larder_format::compress::decompress(larder_format::Compressor::Gzip, &gzip.body, 1 << 20)
            .expect("real gzip");
        assert_eq!(String::from_utf8(decoded).expect("utf-8"), expected);
        for accept in [None, Some("identity"), Some("br")] {
            let plain = ask(accept).await;
            assert_eq!((plain.cache(), plain.header("content-encoding")), ("HIT", None), "{accept:?} after {first:?}");
            assert_eq!(plain.text(), expected);
        }
        assert!(gzip.header("vary").is_some_and(|v| v.contains("Accept-Encoding")));
        // Compressed by larder (the app sent identity): another representation, so a weak tag. Sent as stored: as is.
        let expected_etag = if first.is_none() { "W/\"p1\"" } else { "\"p1\"" };
        assert_eq!(gzip.header("etag"), Some(expected_etag), "first: {first:?}");
    }
    assert_eq!(origin.count("/p"), 2, "one fill for each larder, whatever the clients accepted");
}

#[tokio::test]
async fn url_prefixes_several_tags_and_purges_that_match_nothing() {
    let origin = Origin::start(|seen| {
        let tag = seen.path.split('/').nth(1).unwrap_or("none").to_owned();
        let headers = vec![("cache-control", "max-age=600".into()), ("surrogate-key", format!("section:{tag}"))];
        (StatusCode::OK, headers, Bytes::from(seen.path.clone()))
    })
    .await;
    let larder = Larder::start(&origin.url(), |c| c.namespace = "www".into()).await;
    for path in ["/products/1", "/products/2", "/productsale", "/hats/1", "/shoes/1", "/other/1"] {
        get(&larder.url(path), &[]).await;
    }
    let host = larder.addr.to_string();
    let by_url_prefix = purge(&larder, format!(r#"{{"url_prefix":"http://{host}/products/"}}"#)).await;
    assert_eq!(by_url_prefix["purged"], 2);
    let by_tags = purge(&larder, r#"{"tags":["section:hats","section:shoes"]}"#.to_owned()).await;
    assert_eq!(by_tags["purged"], 2);
    for (path, expected) in [
        ("/products/1", "MISS"),
        ("/products/2", "MISS"),
        ("/productsale", "HIT"),
        ("/hats/1", "MISS"),
        ("/shoes/1", "MISS"),
        ("/other/1", "HIT"),
    ] {
        assert_eq!(get(&larder.url(path), &[]).await.cache(), expected, "{path}");
    }
    let a_path_as_key_prefix = purge(&larder, r#"{"prefix":"/products/"}"#.to_owned()).await;
    assert_eq!(a_path_as_key_prefix["purged"], 0);
    assert!(
        a_path_as_key_prefix["warning"].as_str().is_some_and(|w| w.contains("url_prefix")),
        "{a_path_as_key_prefix}"
    );
    let bad = send(
        "POST",
        &larder.admin_url("/purge"),
        &[("content-type", "application/json")],
        r#"{"url_prefix":"/products/"}"#,
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_push_the_proxy_would_never_serve_says_so() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |c| c.namespace = "www".into()).await;
    let response = HttpResponse {
        status: 200,
        headers: vec![(Bytes::from_static(b"content-type"), Bytes::from_static(b"text/html"))],
        body: Bytes::from_static(b"page"),
        content_encoding: ContentEncoding::Identity,
    };
    let meta = EntryMeta::with_ttl(larder_format::now_ms(), 600_000);
    let page = encode_response(&response, &meta, &EncodeOptions::default()).expect("encodes");
    let value = encode_value(&"just a value", &meta, &EncodeOptions::default()).expect("encodes");
    let host = larder.addr.to_string();
    let push = |key: String, entry: Vec<u8>| {
        let url = larder.admin_url(&format!("/entries/{}", escaped(&key)));
        async move {
            let answer = send("PUT", &url, &[], entry).await;
            assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text());
            serde_json::from_slice::<serde_json::Value>(&answer.body).expect("JSON")
        }
    };
    let served = push(format!("www:GET:http://{host}/ok"), page.clone()).await;
    assert!(served.get("warning").is_none(), "{served}");
    for (key, entry, says) in [
        (format!("GET:http://{host}/ok"), page.clone(), "namespace"),
        (format!("www:GET:http://{host}/p?b=2&a=1"), page.clone(), "www:GET:http"),
        (format!("www:GET:http://{host}/value"), value, "value entry"),
        ("www:my-page".to_owned(), page.clone(), "never serve"),
    ] {
        let answer = push(key.clone(), entry).await;
        assert!(answer["warning"].as_str().is_some_and(|w| w.contains(says)), "{key}: {answer}");
    }
    assert_eq!(get(&larder.url("/ok"), &[]).await.cache(), "HIT");
}

#[tokio::test]
async fn a_pushed_compression_bomb_is_refused() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |c| c.cache.max_body_bytes = 1 << 20).await;
    let zeros = vec![0u8; 8 << 20];
    let response = HttpResponse {
        status: 200,
        headers: vec![],
        body: Bytes::from(
            larder_format::compress::compress(larder_format::Compressor::Gzip, None, &zeros).expect("gzip"),
        ),
        content_encoding: ContentEncoding::Gzip,
    };
    let entry =
        encode_response(&response, &EntryMeta::with_ttl(larder_format::now_ms(), 600_000), &EncodeOptions::default())
            .expect("encodes");
    let key = larder.proxy.key_for(&larder.addr.to_string(), "/bomb");
    let answer = send("PUT", &larder.admin_url(&format!("/entries/{}", escaped(&key))), &[], entry).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.text().contains("decodes to more than"), "{}", answer.text());
}
