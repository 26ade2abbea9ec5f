//! The admin API against the attacks of docs/security.md ("The shared store"): it needs a token by default; keys
//! that could become protocol in a store are refused; values that make their reader run code are refused; and a
//! browser page (cross-site request forgery, DNS rebinding) cannot use it even when it has no token.

mod support;

use bytes::Bytes;
use http::StatusCode;
use larder_format::{encode_value, EncodeOptions, EntryMeta};
use larder_proxy::{ConfigError, ProxyConfig, ServeError, Server};
use larder_store::{ManualClock, MemoryStore};
use support::{cacheable, get, send, Larder, Origin};

fn memory() -> MemoryStore {
    MemoryStore::builder().capacity_bytes(1 << 20).build().expect("store")
}

#[tokio::test]
async fn the_admin_api_does_not_start_without_a_token_unless_opened_on_loopback() {
    let config = ProxyConfig {
        upstream: "http://127.0.0.1:9".into(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        admin: Some("127.0.0.1:0".parse().expect("addr")),
        ..ProxyConfig::default()
    };
    let refused = Server::bind(config.clone(), memory(), ManualClock::new(0));
    let Err(ServeError::Config(ConfigError::AdminWithoutToken(_))) = refused else {
        panic!("started without a token");
    };
    let message = ConfigError::AdminWithoutToken("127.0.0.1:8081".parse().expect("addr")).to_string();
    assert!(message.contains("--admin-token") && message.contains("--admin-no-token"), "{message}");
    let wide = ProxyConfig { admin: Some("0.0.0.0:0".parse().expect("addr")), admin_no_token: true, ..config.clone() };
    assert!(Server::bind(wide, memory(), ManualClock::new(0)).is_err(), "no opting out beyond loopback");
    let tokened = ProxyConfig { admin_token: Some("s3cret".into()), ..config };
    assert!(Server::bind(tokened, memory(), ManualClock::new(0)).is_ok());
}

#[tokio::test]
async fn keys_that_are_not_safe_keys_are_refused_before_the_store_sees_them() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let long = "k".repeat(251);
    // The request of issue 15: a memcached command riding on a key (CR LF, space), and their relatives.
    for raw in ["z%0D%0Amg%20evil%20v", "a%20b", "a%00b", "a%09b", "a%7Fb", long.as_str(), ""] {
        for method in ["PUT", "GET", "DELETE"] {
            let got = send(method, &larder.admin_url(&format!("/entries/{raw}")), &[], Bytes::from_static(b"x")).await;
            assert_eq!(got.status, StatusCode::BAD_REQUEST, "{method} {raw}: {}", got.text());
            assert!(got.text().contains("invalid key"), "{}", got.text());
        }
    }
    let fine = send("DELETE", &larder.admin_url("/entries/k%C3%A9"), &[], Bytes::new()).await;
    assert_eq!(fine.status, StatusCode::NOT_FOUND, "bytes past 0x7F are safe: {}", fine.text());
}

/// A value entry whose MessagePack payload is `payload` (built by hand: the ext values are the point).
fn value_entry(payload: &[u8]) -> Vec<u8> {
    let mut entry = encode_value(&(), &EntryMeta::with_ttl(larder_format::now_ms(), 60_000), &EncodeOptions::default())
        .expect("encodes");
    let start = entry.len() - 1; // `()` is one byte of MessagePack (nil)
    entry.truncate(start);
    entry.extend_from_slice(payload);
    entry
}

#[tokio::test]
async fn values_that_make_their_reader_run_code_are_refused() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    let pickle = [&[0xc7u8, 0x05, 80][..], b"\x80\x05N.\x00"].concat(); // ext 80: a pickle
    let nested_marshal = [&[0x91u8, 0x81, 0xa1, b'k', 0xd4, 101][..], b"\x04"].concat(); // [{"k": ext 101}]
    for (name, payload) in [("pickle", pickle), ("nested Marshal", nested_marshal)] {
        let put = send("PUT", &larder.admin_url("/entries/:1:greeting"), &[], value_entry(&payload)).await;
        assert_eq!(put.status, StatusCode::BAD_REQUEST, "{name}: {}", put.text());
        assert!(put.text().contains("ext 80 or 101"), "{}", put.text());
        let read = get(&larder.admin_url("/entries/:1:greeting"), &[]).await;
        assert_eq!(read.status, StatusCode::NOT_FOUND, "{name} was not stored");
    }
    let other_ext = [&[0xd4u8, 7][..], b"\x00"].concat();
    let put = send("PUT", &larder.admin_url("/entries/plain"), &[], value_entry(&other_ext)).await;
    assert_eq!(put.status, StatusCode::CREATED, "other ext types are data: {}", put.text());
}

#[tokio::test]
async fn a_browser_page_cannot_purge_or_read_through_the_admin_api() {
    let origin = Origin::start(cacheable(vec![("cache-control", "max-age=600".into())])).await;
    let larder = Larder::start(&origin.url(), |_| {}).await;
    get(&larder.url("/p"), &[]).await;
    let purge = larder.admin_url("/purge");
    let body = || Bytes::from_static(br#"{"prefix":""}"#);
    let json = ("content-type", "application/json");
    // The form post of issue 15: a cross-site "simple request" with text/plain.
    let forged = [("origin", "http://evil.example"), ("content-type", "text/plain")];
    assert_eq!(send("POST", &purge, &forged, body()).await.status, StatusCode::FORBIDDEN);
    assert_eq!(
        send("POST", &purge, &[json, ("sec-fetch-site", "cross-site")], body()).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(send("POST", &purge, &[json, ("origin", "null")], body()).await.status, StatusCode::FORBIDDEN);
    let unlabelled = send("POST", &purge, &[("content-type", "text/plain")], body()).await;
    assert_eq!(unlabelled.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", unlabelled.text());
    // DNS rebinding: the page's own host name, resolved to 127.0.0.1.
    let port = larder.admin.expect("admin").port();
    let rebound = format!("evil.example:{port}");
    assert_eq!(send("POST", &purge, &[json, ("host", &rebound)], body()).await.status, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(get(&larder.admin_url("/metrics"), &[("host", &rebound)]).await.status, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(get(&larder.url("/p"), &[]).await.cache(), "HIT", "nothing was purged");
    // What programs send is accepted: no Origin, or the listener's own; localhost by name.
    let localhost = format!("localhost:{port}");
    let same_origin = format!("http://127.0.0.1:{port}");
    assert_eq!(send("POST", &purge, &[json, ("host", &localhost)], body()).await.status, StatusCode::OK);
    assert_eq!(send("POST", &purge, &[json, ("origin", &same_origin)], body()).await.status, StatusCode::OK);
    assert_eq!(get(&larder.url("/p"), &[]).await.cache(), "MISS");
    assert_eq!(get(&larder.admin_url("/health"), &[("host", &rebound)]).await.status, StatusCode::OK, "health is open");
}

#[tokio::test]
async fn with_a_token_the_browser_rules_still_hold() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |c| {
        c.admin_no_token = false;
        c.admin_token = Some("s3cret".into());
    })
    .await;
    let purge = larder.admin_url("/purge");
    let auth = ("authorization", "Bearer s3cret");
    let body = || Bytes::from_static(br#"{"tag":"t"}"#);
    let forged = [auth, ("origin", "http://evil.example"), ("content-type", "application/json")];
    assert_eq!(send("POST", &purge, &forged, body()).await.status, StatusCode::FORBIDDEN);
    let ok = send("POST", &purge, &[auth, ("content-type", "application/json")], body()).await;
    assert_eq!((ok.status, ok.text().trim()), (StatusCode::OK, r#"{"purged":0}"#));
    let wrong_length = [("authorization", "Bearer s3cret-and-more"), ("content-type", "application/json")];
    assert_eq!(send("POST", &purge, &wrong_length, body()).await.status, StatusCode::UNAUTHORIZED);
}

/// Issue 32, finding 6: `/health` and `/ready` are open (load balancers and probes carry no token), so without the
/// token they say only whether larder is well, never the upstream's address, the store's servers or their errors.
#[tokio::test]
async fn health_without_the_token_says_only_ok_or_degraded() {
    let origin = Origin::start(cacheable(vec![])).await;
    let larder = Larder::start(&origin.url(), |c| {
        c.admin_no_token = false;
        c.admin_token = Some("s3cret".into());
    })
    .await;
    let upstream_port = origin.url().rsplit(':').next().map(|p| p.trim_end_matches('/').to_owned()).expect("port");
    for (path, minimal) in [("/health", r#"{"status":"ok"}"#), ("/ready", r#"{"ready":true}"#)] {
        let open = get(&larder.admin_url(path), &[]).await;
        assert_eq!((open.status, open.text().trim()), (StatusCode::OK, minimal), "{path} without the token");
        assert!(!open.text().contains(&upstream_port), "{path} names the upstream: {}", open.text());
        let wrong = get(&larder.admin_url(path), &[("authorization", "Bearer wrong")]).await;
        assert_eq!(wrong.text().trim(), minimal, "{path} with a wrong token");
        let full = get(&larder.admin_url(path), &[("authorization", "Bearer s3cret")]).await;
        assert_eq!(full.status, StatusCode::OK);
        assert!(full.text().contains("\"store\""), "{path} with the token has the details: {}", full.text());
    }
    let full = get(&larder.admin_url("/health"), &[("authorization", "Bearer s3cret")]).await.text();
    assert!(full.contains(&upstream_port), "the operator is told the upstream: {full}");
    // Without a token configured (a loopback API left open), a browser page still gets only the status.
    let open_api = Larder::start(&origin.url(), |_| {}).await;
    let from_a_page = get(&open_api.admin_url("/health"), &[("origin", "http://evil.example")]).await;
    assert_eq!(from_a_page.text().trim(), r#"{"status":"ok"}"#);
    assert!(get(&open_api.admin_url("/health"), &[]).await.text().contains(&upstream_port), "a local program is told");
}
