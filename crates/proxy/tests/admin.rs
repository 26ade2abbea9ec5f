//! The admin API and purging: pushed pages are served without asking the app; purges by URL, prefix and tag;
//! PURGE from allowed addresses; metrics and health; the bearer token.

mod support;

use bytes::Bytes;
use http::StatusCode;
use larder_format::{encode_response, ContentEncoding, EncodeOptions, EntryMeta, HttpResponse};
use support::{cacheable, get, send, Larder, Origin};

fn page_entry(body: &'static str, tags: &[&str]) -> Vec<u8> {
    let response = HttpResponse {
        status: 200,
        headers: vec![
            (Bytes::from_static(b"content-type"), Bytes::from_static(b"text/html")),
            (Bytes::from_static(b"x-pushed"), Bytes::from_static(b"yes")),
        ],
        body: Bytes::from_static(body.as_bytes()),
        content_encoding: ContentEncoding::Identity,
    };
    let mut meta = EntryMeta::with_ttl(larder_format::now_ms(), 600_000);
    meta.tags = tags.iter().map(|t| (*t).to_owned()).collect();
    encode_response(&response, &meta, &EncodeOptions::default()).expect("encodes")
}

fn key_of(larder: &Larder, path: &str) -> String {
    larder.proxy.key_for(&larder.addr.to_string(), path)
}

fn escaped(key: &str) -> String {
    key.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

#[tokio::test]
async fn a_pushed_page_is_served_without_asking_the_app() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let key = key_of(&larder, "/pushed?b=2&a=1");
    let put =
        send("PUT", &larder.admin_url(&format!("/entries/{}", escaped(&key))), &[], page_entry("<h1>pushed</h1>", &[]))
            .await;
    assert_eq!(put.status, StatusCode::CREATED);
    let got = get(&larder.url("/pushed?a=1&b=2&utm_campaign=x"), &[]).await;
    assert_eq!((got.status, got.cache(), got.text().as_str()), (StatusCode::OK, "HIT", "<h1>pushed</h1>"));
    assert_eq!(got.header("x-pushed"), Some("yes"));
    assert_eq!(origin.count("/pushed?a=1&b=2&utm_campaign=x"), 0);

    let read = get(&larder.admin_url(&format!("/entries/{}", escaped(&key))), &[]).await;
    assert_eq!(read.status, StatusCode::OK);
    assert!(larder_format::Entry::parse(&read.body).is_ok(), "GET returns entry bytes");
    let deleted = send("DELETE", &larder.admin_url(&format!("/entries/{}", escaped(&key))), &[], Bytes::new()).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(get(&larder.admin_url(&format!("/entries/{}", escaped(&key))), &[]).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn invalid_entries_are_refused_with_the_reason() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let put = send("PUT", &larder.admin_url("/entries/x"), &[], Bytes::from_static(b"\xc1\x4c\x09garbage")).await;
    assert_eq!(put.status, StatusCode::BAD_REQUEST);
    assert!(put.text().contains("unsupported_version"), "{}", put.text());
}

#[tokio::test]
async fn purge_by_url_prefix_and_tag() {
    let origin = Origin::start(|seen| {
        let tags = if seen.path.starts_with("/shoes") { "category:shoes" } else { "category:hats" };
        (
            StatusCode::OK,
            vec![("cache-control", "max-age=600".into()), ("surrogate-key", tags.into())],
            Bytes::from(seen.path.clone()),
        )
    })
    .await;
    let larder = Larder::start(&origin.url(), |c| c.namespace = "www".into()).await;
    for path in ["/shoes/1", "/shoes/2", "/hats/1", "/hats/2", "/other"] {
        get(&larder.url(path), &[]).await;
    }
    let purge_url = larder.admin_url("/purge");
    let purge = |body: String| send("POST", &purge_url, &[("content-type", "application/json")], body);
    let by_tag = purge(r#"{"tag":"category:shoes"}"#.into()).await;
    assert_eq!((by_tag.status, by_tag.text().trim()), (StatusCode::OK, r#"{"purged":2}"#));
    let url = format!("http://{}/hats/1", larder.addr);
    assert_eq!(purge(format!(r#"{{"url":"{url}"}}"#)).await.text().trim(), r#"{"purged":1}"#);
    let purged_total = || async {
        let metrics = get(&larder.admin_url("/metrics"), &[]).await.text();
        metrics.lines().find_map(|l| l.strip_prefix("larder_purged_total ")?.parse::<u64>().ok()).expect("metric")
    };
    assert_eq!(purged_total().await, 3, "each purged entry counted once (a URL purge used to count twice)");
    let prefix = format!("www:GET:http://{}/hats", larder.addr);
    assert_eq!(purge(format!(r#"{{"prefix":"{prefix}"}}"#)).await.text().trim(), r#"{"purged":1}"#);
    assert_eq!(purged_total().await, 4);
    for (path, expected) in
        [("/shoes/1", "MISS"), ("/shoes/2", "MISS"), ("/hats/1", "MISS"), ("/hats/2", "MISS"), ("/other", "HIT")]
    {
        assert_eq!(get(&larder.url(path), &[]).await.cache(), expected, "{path}");
    }
    assert_eq!(purge(r#"{"tag":"a","url":"b"}"#.into()).await.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn purge_method_works_from_purge_from_addresses_only() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=600".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    get(&larder.url("/p"), &[]).await;
    let purged = send("PURGE", &larder.url("/p"), &[], Bytes::new()).await;
    assert_eq!(purged.status, StatusCode::OK);
    assert_eq!(get(&larder.url("/p"), &[]).await.cache(), "MISS");
    // Nothing under the key: the answer names the key and the likely reason (another Host), not a bare 0.
    let other_host = send("PURGE", &larder.url("/p"), &[("host", "localhost")], Bytes::new()).await;
    assert_eq!(other_host.status, StatusCode::NOT_FOUND);
    let answer: serde_json::Value = serde_json::from_slice(&other_host.body).expect("JSON");
    assert_eq!(answer["key"], "GET:http://localhost/p", "{answer}");
    assert!(answer["note"].as_str().is_some_and(|n| n.contains("Host")), "{answer}");

    // The default: nobody, loopback included (a TLS terminator on this host would make every client loopback).
    let closed = Larder::start(&origin.url(), |c| c.purge_from = larder_proxy::ProxyConfig::default().purge_from).await;
    get(&closed.url("/p"), &[]).await;
    let refused = send("PURGE", &closed.url("/p"), &[], Bytes::new()).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.text().contains("--purge-from"), "says how to allow it: {}", refused.text());
    assert_eq!(get(&closed.url("/p"), &[]).await.cache(), "HIT");
    let elsewhere = Larder::start(&origin.url(), |c| c.purge_from = vec!["10.0.0.0/8".into()]).await;
    get(&elsewhere.url("/p"), &[]).await;
    assert_eq!(send("PURGE", &elsewhere.url("/p"), &[], Bytes::new()).await.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn metrics_and_health() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=600".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    get(&larder.url("/m"), &[]).await;
    get(&larder.url("/m"), &[]).await;
    assert_eq!(get(&larder.admin_url("/purge"), &[]).await.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        send("POST", &larder.admin_url("/metrics"), &[("content-type", "application/json")], "{}").await.status,
        StatusCode::METHOD_NOT_ALLOWED
    );
    let health = get(&larder.admin_url("/health"), &[]).await;
    assert_eq!(health.status, StatusCode::OK);
    let report: serde_json::Value = serde_json::from_slice(&health.body).expect("JSON");
    assert_eq!((report["status"].as_str(), report["upstream"]["state"].as_str()), (Some("ok"), Some("up")));
    let metrics = get(&larder.admin_url("/metrics"), &[]).await.text();
    for line in [
        "larder_requests_total{cache=\"hit\"} 1\n",
        "larder_requests_total{cache=\"miss\"} 1\n",
        "larder_store_entries 1\n",
        "larder_upstream_latency_seconds_count 1\n",
        "larder_upstream_up 1\n",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
}

#[tokio::test]
async fn a_token_guards_the_admin_api_when_set() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |c| c.admin_token = Some("s3cret".into())).await;
    assert_eq!(get(&larder.admin_url("/metrics"), &[]).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        get(&larder.admin_url("/metrics"), &[("authorization", "Bearer wrong")]).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(get(&larder.admin_url("/metrics"), &[("authorization", "Bearer s3cret")]).await.status, StatusCode::OK);
    assert_eq!(get(&larder.admin_url("/health"), &[]).await.status, StatusCode::OK, "health checks need no token");
}

#[tokio::test]
async fn pushed_entries_cannot_break_responses_or_smuggle_connection_fields() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let gzipped =
        larder_format::compress::compress(larder_format::Compressor::Gzip, None, b"hello hello").expect("gzip");
    let response = HttpResponse {
        status: 200,
        headers: vec![
            (Bytes::from_static(b"content-length"), Bytes::from_static(b"3")),
            (Bytes::from_static(b"connection"), Bytes::from_static(b"x-priv")),
            (Bytes::from_static(b"x-priv"), Bytes::from_static(b"1")),
            (Bytes::from_static(b"keep-alive"), Bytes::from_static(b"timeout=5")),
            (Bytes::from_static(b"content-encoding"), Bytes::from_static(b"gzip")),
        ],
        body: Bytes::from(gzipped),
        content_encoding: ContentEncoding::Identity,
    };
    let entry =
        encode_response(&response, &EntryMeta::with_ttl(larder_format::now_ms(), 600_000), &EncodeOptions::default())
            .expect("encodes");
    let key = key_of(&larder, "/pushed");
    assert_eq!(
        send("PUT", &larder.admin_url(&format!("/entries/{}", escaped(&key))), &[], entry).await.status,
        StatusCode::CREATED
    );
    let plain = get(&larder.url("/pushed"), &[]).await;
    assert_eq!(
        (plain.status, plain.text().as_str()),
        (StatusCode::OK, "hello hello"),
        "decoded, with a correct length"
    );
    for gone in ["connection", "x-priv", "keep-alive", "content-encoding"] {
        assert_eq!(plain.header(gone), None, "{gone}");
    }
    let gzip = get(&larder.url("/pushed"), &[("accept-encoding", "gzip")]).await;
    assert_eq!(gzip.header("content-encoding"), Some("gzip"));
}

#[tokio::test]
async fn entries_that_would_never_serve_are_refused_and_https_urls_purge_the_http_key() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=600".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let mut bad = larder_format::encode_serialized(
        larder_format::Kind::Response,
        larder_format::Serializer::MsgPack,
        b"\xa5hello",
        &EntryMeta::with_ttl(larder_format::now_ms(), 0),
        &EncodeOptions::default(),
    )
    .expect("encodes");
    let refused = send("PUT", &larder.admin_url("/entries/k"), &[], bad.clone()).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.text().contains("bad_value"), "{}", refused.text());
    bad.truncate(23);
    assert_eq!(send("PUT", &larder.admin_url("/entries/k"), &[], bad).await.status, StatusCode::BAD_REQUEST);

    get(&larder.url("/s"), &[]).await;
    let url = format!("https://{}/s", larder.addr);
    let json = [("content-type", "application/json")];
    let purged = send("POST", &larder.admin_url("/purge"), &json, format!(r#"{{"url":"{url}"}}"#)).await;
    assert_eq!(purged.text().trim(), r#"{"purged":1}"#);
}
