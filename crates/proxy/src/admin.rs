//! The admin API, on its own listener (in `larder serve` on a thread of its own, so nothing here stalls a core that
//! serves hits). Safe by default (docs/security.md): a bearer token is required unless the operator opens a
//! loopback listener without one, and every request but `/health` and `/ready` must also look like it came from a
//! program, not a browser tricked into sending it: no cross-site `Origin` or `Sec-Fetch-Site`, a JSON content type
//! on purges, and on a loopback listener a `Host` that names it (so a DNS-rebinding page cannot reach it).
//!
//! - `PUT /entries/{key}` stores entry bytes (spec/FORMAT.md) that any language produced: an app can push a
//!   pre-rendered page and larder serves it without asking the app. The entry is decoded completely first (on the
//!   blocking pool), and the answer warns when the proxy would never look the key up. `GET` reads one back,
//!   `DELETE` removes it.
//! - `POST /purge` with one of `{"url": …}` (every variant and coding of that URL), `{"url_prefix": …}` (every
//!   URL that starts with it), `{"prefix": …}` (store keys that start with it), `{"tag": …}` or
//!   `{"tags": […]}`. A purge that matches nothing says why it may have missed.
//! - `GET /metrics` (Prometheus text), `GET /health` (the process, and the upstream as larder last found it),
//!   `GET /ready` (503 while the upstream cannot be reached). Without the token (or from a browser page), both say
//!   only `ok`/`degraded` and ready or not: the upstream's and the store servers' addresses and errors are for the
//!   operator, not for every local process.
//!
//! A refused request (401, 403, 421, 415) is answered with `Connection: close` and its connection closed: a
//! client without the token cannot keep a connection, and so a slot, by sending a request and idling. Idle
//! connections are closed after `limits.admin_idle_timeout_secs`, and one client address holds at most
//! `limits.admin_connections_per_client` (server.rs, per_client.rs).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use larder_format::key::{key_authority, MAX_KEY_LEN};
use larder_format::{ContentEncoding, Entry, Kind};
use larder_store::keys::key_problem;
use larder_store::{Purged, Store};
use percent_encoding::percent_decode_str;
use serde::Deserialize;
use serde_json::json;

use crate::body::ProxyBody;
use crate::handler::Proxy;
use crate::metrics::Metrics;
use crate::respond;

/// Largest entry accepted by PUT.
const MAX_PUT: usize = 256 << 20;
/// Largest purge request body.
const MAX_PURGE: usize = 64 << 10;
/// How long `/ready` waits for a connection to the upstream.
const READY_CONNECT: Duration = Duration::from_secs(1);
/// Hashed keys keep this many readable bytes (spec/FORMAT.md §5.1): a longer prefix cannot match them.
const HASHED_PREFIX_LEN: usize = 180;

/// A purge request: exactly one criterion.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PurgeRequest {
    url: Option<String>,
    url_prefix: Option<String>,
    prefix: Option<String>,
    tag: Option<String>,
    tags: Option<Vec<String>>,
}

/// Ext types that make a reader run code (spec/FORMAT.md §2): never accepted from the admin API.
const CODE_EXT_TYPES: [i8; 2] = [80, 101];

pub struct Admin<S> {
    proxy: Arc<Proxy<S>>,
    token: Option<String>,
    /// The address the admin listener is bound to.
    bound: SocketAddr,
}

impl<S: Store> Admin<S> {
    /// `token`: the bearer token every request but `/health` and `/ready` must carry (`None` only when the
    /// configuration opened a loopback listener without one). `bound`: the listener's own address.
    pub fn new(proxy: Arc<Proxy<S>>, token: Option<String>, bound: SocketAddr) -> Admin<S> {
        Admin { proxy, token: token.filter(|t| !t.is_empty()), bound }
    }

    /// The answer that refuses `request`, if it must be refused before anything else is looked at; it closes the
    /// connection, so that a refused client cannot hold one open by idling after its answer.
    fn refusal(&self, request: &Request<Incoming>) -> Option<Response<ProxyBody>> {
        let mut refusal = self.refusal_of(request)?;
        refusal.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
        Some(refusal)
    }

    fn refusal_of(&self, request: &Request<Incoming>) -> Option<Response<ProxyBody>> {
        let headers = request.headers();
        if let Some(token) = &self.token {
            if !bearer_matches(headers.get(AUTHORIZATION), token) {
                let mut response = error(StatusCode::UNAUTHORIZED, "a bearer token is required");
                response.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer"));
                return Some(response);
            }
        }
        let site = headers.get("sec-fetch-site").map(HeaderValue::as_bytes);
        if site.is_some_and(|s| s != b"same-origin" && s != b"none") {
            return Some(error(StatusCode::FORBIDDEN, "cross-site requests to the admin API are refused"));
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let authority = origin.to_str().ok().and_then(|o| o.split_once("://")).map(|(_, a)| a);
            if !authority.is_some_and(|a| self.names_this_listener(a)) {
                return Some(error(StatusCode::FORBIDDEN, "requests from another origin are refused"));
            }
        }
        if self.bound.ip().is_loopback() {
            let host = headers
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .or_else(|| request.uri().authority().map(|a| a.as_str()));
            if !host.is_some_and(|h| self.names_this_listener(h)) {
                return Some(error(
                    StatusCode::MISDIRECTED_REQUEST,
                    &format!(
                        "a loopback admin API answers only to Host {} or localhost:{}",
                        self.bound,
                        self.bound.port()
                    ),
                ));
            }
        }
        if request.method() == Method::POST {
            let json = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
                v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
            });
            if !json {
                return Some(error(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "send the body as Content-Type: application/json",
                ));
            }
        }
        None
    }

    /// Whether `authority` (`host[:port]`) names the admin listener: its own address or, on loopback,
    /// `localhost`, with its port.
    fn names_this_listener(&self, authority: &str) -> bool {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => (host, port.parse::<u16>().ok()),
            _ => (authority, None),
        };
        if port.unwrap_or(80) != self.bound.port() {
            return false;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip = host.parse::<std::net::IpAddr>().ok();
        if self.bound.ip().is_unspecified() {
            return true;
        }
        ip == Some(self.bound.ip()) || (self.bound.ip().is_loopback() && host.eq_ignore_ascii_case("localhost"))
    }

    pub async fn handle(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let path = request.uri().path().to_owned();
        let method = request.method().clone();
        match (&method, path.as_str()) {
            // Anyone may ask whether larder is up (load balancers, probes); only an authorised request is told the
            // upstream's and the store servers' names and errors.
            (&Method::GET, "/health") => return self.health(self.refusal_of(&request).is_none()),
            (&Method::GET, "/ready") => return self.ready(self.refusal_of(&request).is_none()).await,
            _ => {}
        }
        if let Some(refusal) = self.refusal(&request) {
            return refusal;
        }
        match (method, path.as_str()) {
            (Method::GET, "/metrics") => self.metrics().await,
            (Method::POST, "/purge") => self.purge(request).await,
            (_, "/purge") => not_allowed("POST"),
            (_, "/metrics") => not_allowed("GET"),
            (method, p) if p.starts_with("/entries/") => {
                let raw = &p["/entries/".len()..];
                let Ok(key) = percent_decode_str(raw).decode_utf8() else {
                    return error(StatusCode::BAD_REQUEST, "the key is not UTF-8");
                };
                let key = key.into_owned();
                if let Some(problem) = key_problem(&key) {
                    return error(
                        StatusCode::BAD_REQUEST,
                        &format!("invalid key: {problem}; `larder key URL` gives the key of a page"),
                    );
                }
                match method {
                    Method::PUT => self.put(&key, request).await,
                    Method::GET => self.get(&key).await,
                    Method::DELETE => self.delete(&key).await,
                    _ => not_allowed("PUT, GET, DELETE"),
                }
            }
            _ => error(StatusCode::NOT_FOUND, "no such endpoint"),
        }
    }

    /// `{"status": "ok"|"degraded"}`, with the details when `detailed` (an authorised request).
    fn health(&self, detailed: bool) -> Response<ProxyBody> {
        let report = self.proxy.health.report();
        let state = match report.up {
            None => "unknown",
            Some(true) => "up",
            Some(false) => "down",
        };
        let (store, store_ok) = self.store_report();
        // "degraded": serving, but an upstream or store server is failing (requests then go to the app, or are
        // answered stale; nothing fails for clients, but the operator should know).
        let status = if report.up == Some(false) || !store_ok { "degraded" } else { "ok" };
        if !detailed {
            return respond::json(StatusCode::OK, json!({ "status": status }).to_string());
        }
        let body = json!({
            "status": status,
            "upstream": {
                "address": self.proxy.upstream.address(),
                "state": state,
                "consecutive_failures": report.consecutive_failures,
                "last_answer_ms": report.last_answer_ms,
                "last_error": report.last_failure.map(|(at, error)| json!({"at_ms": at, "error": error})),
            },
            "store": store,
        });
        respond::json(StatusCode::OK, body.to_string())
    }

    /// The store and each of its servers as the last requests found them; `true` when every server is up.
    fn store_report(&self) -> (serde_json::Value, bool) {
        let cache = self.proxy.storage();
        let servers = cache.server_reports();
        let all_up = servers.iter().all(|s| s.state == "up");
        let servers: Vec<serde_json::Value> = servers
            .into_iter()
            .map(|s| {
                json!({
                    "server": s.server,
                    "state": s.state,
                    "consecutive_failures": s.consecutive_failures,
                    "errors": s.errors,
                    "last_error": s.last_failure.map(|(at, error)| json!({"at_ms": at, "error": error})),
                })
            })
            .collect();
        (json!({"backend": cache.backend(), "servers": servers}), all_up)
    }

    /// 503 while the upstream cannot be reached. The store is reported (when `detailed`) but does not decide:
    /// without it requests go to the app, which is what a cache that fails must do.
    async fn ready(&self, detailed: bool) -> Response<ProxyBody> {
        let reachable = self.proxy.upstream.reachable(READY_CONNECT).await;
        if !detailed {
            let status = if reachable.is_ok() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
            return respond::json(status, json!({ "ready": reachable.is_ok() }).to_string());
        }
        let (store, _) = self.store_report();
        match reachable {
            Ok(()) => respond::json(StatusCode::OK, json!({"ready": true, "store": store}).to_string()),
            Err(reason) => respond::json(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"ready": false, "upstream": reason, "store": store}).to_string(),
            ),
        }
    }

    async fn metrics(&self) -> Response<ProxyBody> {
        let stats = self.proxy.storage().store_stats().await.unwrap_or_default();
        let proxy = &self.proxy;
        let dropped = proxy.access_log().map(|log| log.dropped());
        let mut text = proxy.metrics().render(&stats, &proxy.storage().stats(), proxy.health.report().up, dropped);
        text.push_str(&crate::metrics::render_server_errors(
            proxy.storage().backend(),
            &proxy.storage().server_errors(),
        ));
        let mut response = Response::new(ProxyBody::full(Bytes::from(text)));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
        response
    }

    async fn put(&self, key: &str, request: Request<Incoming>) -> Response<ProxyBody> {
        let body = match read_body(request.into_body(), MAX_PUT).await {
            Ok(body) => body,
            Err(response) => return response,
        };
        let max_decoded = self.proxy.settings.max_decoded;
        let checked = {
            let body = body.clone();
            tokio::task::spawn_blocking(move || validate(&body, max_decoded)).await
        };
        let kind = match checked {
            Ok(Ok(kind)) => kind,
            Ok(Err(message)) => return error(StatusCode::BAD_REQUEST, &format!("invalid entry: {message}")),
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        };
        if let Err(e) = self.proxy.storage().write_entry(key, &body).await {
            return error(StatusCode::INSUFFICIENT_STORAGE, &e.to_string());
        }
        Metrics::bump(&self.proxy.metrics().stored);
        let mut answer = json!({"stored": true});
        if let Some(warning) = self.unserved_key_warning(key, kind, &body) {
            answer["warning"] = json!(warning);
        }
        respond::json(StatusCode::CREATED, answer.to_string())
    }

    /// Why the proxy would never serve an entry stored under `key`, if it would not.
    fn unserved_key_warning(&self, key: &str, kind: Kind, entry: &[u8]) -> Option<String> {
        if is_hashed(key) {
            return None;
        }
        let namespace = self.proxy.namespace();
        let unprefixed = if namespace.is_empty() {
            key
        } else {
            match key.strip_prefix(namespace).and_then(|k| k.strip_prefix(':')) {
                Some(rest) => rest,
                None => {
                    return Some(format!(
                        "the proxy's namespace is {namespace:?}, so it looks up keys beginning \"{namespace}:\"; \
                         it will never serve this one"
                    ))
                }
            }
        };
        let url = unprefixed.strip_prefix("GET:").filter(|u| u.starts_with("http://") || u.starts_with("https://"));
        let Some(url) = url else {
            return (kind == Kind::Response).then(|| {
                format!(
                    "the proxy looks responses up under keys of the form {}GET:http://host/path, so it will \
                     never serve this one (see `larder key`)",
                    if namespace.is_empty() { String::new() } else { format!("{namespace}:") }
                )
            });
        };
        if kind == Kind::Value
            && Entry::parse(entry).and_then(|e| e.value::<larder_format::key::VaryMarker>(&Default::default())).is_err()
        {
            return Some(
                "a value entry at a URL's key: the proxy serves response entries (kind 1) and Vary markers there; \
                 requests for this URL will go to the app"
                    .into(),
            );
        }
        let (scheme, authority, target) = split_url(url)?;
        let expected = self.proxy.url_key(scheme, authority, target);
        (expected != key).then(|| {
            format!("the proxy looks this URL up under {expected:?}, not this key: it will never serve this entry")
        })
    }

    async fn get(&self, key: &str) -> Response<ProxyBody> {
        match self.proxy.storage().read_entry(key).await {
            Ok(Some(value)) => {
                let mut response = Response::new(ProxyBody::full(value));
                response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
                response
            }
            Ok(None) => error(StatusCode::NOT_FOUND, "no such entry"),
            Err(e) => store_failure(&e),
        }
    }

    async fn delete(&self, key: &str) -> Response<ProxyBody> {
        match self.proxy.storage().delete_entry(key).await {
            Ok(true) => {
                let mut response = Response::new(ProxyBody::empty());
                *response.status_mut() = StatusCode::NO_CONTENT;
                response
            }
            Ok(false) => error(StatusCode::NOT_FOUND, "no such entry"),
            Err(e) => store_failure(&e),
        }
    }

    async fn purge(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let body = match read_body(request.into_body(), MAX_PURGE).await {
            Ok(body) => body,
            Err(response) => return response,
        };
        let purge: PurgeRequest = match serde_json::from_slice(&body) {
            Ok(p) => p,
            Err(e) => return error(StatusCode::BAD_REQUEST, &format!("bad purge request: {e}")),
        };
        let cache = self.proxy.storage();
        let mut warning = None;
        let result = match purge {
            PurgeRequest { url: Some(url), url_prefix: None, prefix: None, tag: None, tags: None } => {
                match split_url(&url) {
                    // Both schemes: larder keys plain requests as http, and a trusted proxy's as https.
                    // `remove_url` counts what it removes in the metrics itself.
                    Some((_, authority, target)) => {
                        let mut removed = 0;
                        for scheme in ["http", "https"] {
                            removed += self.proxy.remove_url(&self.proxy.url_key(scheme, authority, target)).await;
                        }
                        return purged_answer(Purged::Removed(removed), warning);
                    }
                    None => return error(StatusCode::BAD_REQUEST, &format!("not an absolute URL: {url:?}")),
                }
            }
            PurgeRequest { url: None, url_prefix: Some(prefix), prefix: None, tag: None, tags: None } => {
                let Some(keys) = self.url_prefix_keys(&prefix) else {
                    return error(
                        StatusCode::BAD_REQUEST,
                        &format!("not a URL prefix (scheme://host/path, no query): {prefix:?}"),
                    );
                };
                if keys.iter().any(|k| k.len() > HASHED_PREFIX_LEN) {
                    warning = Some(format!(
                        "the prefix is longer than {HASHED_PREFIX_LEN} bytes as a key: URLs whose keys exceed \
                         {MAX_KEY_LEN} bytes are stored under hashed keys and were not matched"
                    ));
                }
                let mut removed = Purged::Removed(0);
                for key in keys {
                    match cache.purge_prefix(&key).await {
                        Ok(n) => removed = removed.and(n),
                        Err(e) => return store_failure(&e),
                    }
                }
                Ok(removed)
            }
            PurgeRequest { url: None, url_prefix: None, prefix: Some(prefix), tag: None, tags: None } => {
                let removed = cache.purge_prefix(&prefix).await;
                if matches!(removed, Ok(Purged::Removed(0))) && !self.looks_like_a_key_prefix(&prefix) {
                    warning = Some(format!(
                        "\"prefix\" is matched against store keys, which look like {:?}; to purge URLs use \
                         \"url_prefix\" (e.g. \"http://host/products/\")",
                        self.proxy.key_for("host", "/path")
                    ));
                }
                removed
            }
            PurgeRequest { url: None, url_prefix: None, prefix: None, tag: Some(tag), tags: None } => {
                cache.purge_tag(&tag).await
            }
            PurgeRequest { url: None, url_prefix: None, prefix: None, tag: None, tags: Some(tags) } => {
                if tags.is_empty() {
                    return error(StatusCode::BAD_REQUEST, "\"tags\" is empty");
                }
                let mut removed = Purged::Removed(0);
                for tag in &tags {
                    match cache.purge_tag(tag).await {
                        Ok(n) => removed = removed.and(n),
                        Err(e) => return store_failure(&e),
                    }
                }
                Ok(removed)
            }
            _ => return error(StatusCode::BAD_REQUEST, "give exactly one of url, url_prefix, prefix, tag, tags"),
        };
        match result {
            Ok(purged) => {
                let counted = purged.count().unwrap_or(0) as u64;
                self.proxy.metrics().purged.fetch_add(counted, std::sync::atomic::Ordering::Relaxed);
                purged_answer(purged, warning)
            }
            Err(e) => store_failure(&e),
        }
    }

    /// The key prefixes a URL prefix stands for (both schemes, see `purge`).
    fn url_prefix_keys(&self, url_prefix: &str) -> Option<Vec<String>> {
        let (_, authority, path) = split_url(url_prefix)?;
        if url_prefix.contains(['?', '#']) || !path.starts_with('/') {
            return None;
        }
        let namespace = self.proxy.namespace();
        let ns = if namespace.is_empty() { String::new() } else { format!("{namespace}:") };
        Some(["http", "https"].iter().map(|s| format!("{ns}GET:{s}://{}{path}", key_authority(s, authority))).collect())
    }

    /// Whether `prefix` could be the start of a key the proxy writes (`[namespace:]GET:http…`).
    fn looks_like_a_key_prefix(&self, prefix: &str) -> bool {
        let namespace = self.proxy.namespace();
        let start = if namespace.is_empty() { "GET:http".to_owned() } else { format!("{namespace}:GET:http") };
        start.starts_with(prefix) || prefix.starts_with(&start)
    }
}

/// `{"purged": n}`, or on memcached, whose purge records cannot count, `{"purged": null, "recorded": true}`
/// (spec/STORES.md §4.4); with a warning when there is one.
fn purged_answer(purged: Purged, warning: Option<String>) -> Response<ProxyBody> {
    let mut answer = match purged {
        Purged::Removed(n) => json!({"purged": n}),
        Purged::Recorded => json!({"purged": null, "recorded": true}),
    };
    if let Some(warning) = warning {
        answer["warning"] = json!(warning);
    }
    respond::json(StatusCode::OK, answer.to_string())
}

/// `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 9110 §11.1), the token compared in
/// constant time.
fn bearer_matches(given: Option<&HeaderValue>, token: &str) -> bool {
    let Some(given) = given.map(HeaderValue::as_bytes) else { return false };
    let Some(space) = given.iter().position(|b| *b == b' ') else { return false };
    let (scheme, rest) = given.split_at(space);
    let credentials = rest.iter().skip_while(|b| **b == b' ').copied().collect::<Vec<u8>>();
    scheme.eq_ignore_ascii_case(b"bearer") && constant_time_eq(&credentials, token.as_bytes())
}

/// Reads a request body up to `max` bytes, or the response that refuses it.
async fn read_body(body: Incoming, max: usize) -> Result<Bytes, Response<ProxyBody>> {
    let limited = http_body_util::Limited::new(body, max);
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(error(StatusCode::PAYLOAD_TOO_LARGE, &format!("the body exceeds the {max}-byte limit")))
        }
        Err(e) => Err(error(StatusCode::BAD_REQUEST, &format!("cannot read the body: {e}"))),
    }
}

/// An entry is accepted only if it decodes completely: an HTTP response entry as a response (and its body, if
/// compressed, within `max_decoded`), a value entry's payload through decompression (and MessagePack structure),
/// so nothing unservable sits in the store.
fn validate(entry: &[u8], max_decoded: usize) -> Result<Kind, String> {
    let describe = |e: larder_format::DecodeError| format!("{}: {}", e.kind(), e.detail());
    let parsed = Entry::parse(entry).map_err(describe)?;
    let limits = larder_format::DecodeLimits::default();
    match parsed.header.kind {
        Kind::Response => {
            let (_, response) =
                larder_format::decode_response(&Bytes::copy_from_slice(entry), &limits).map_err(describe)?;
            let header_coding = response
                .headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(b"content-encoding"))
                .and_then(|(_, v)| std::str::from_utf8(v).ok())
                .and_then(|v| v.trim().parse::<ContentEncoding>().ok());
            let coding = match response.content_encoding {
                ContentEncoding::Identity => header_coding.unwrap_or(ContentEncoding::Identity),
                coding => coding,
            };
            crate::encoding::decoded_len_within(&response.body, coding, max_decoded)
                .map_err(|reason| format!("body: {reason}"))?;
            Ok(Kind::Response)
        }
        Kind::Value => {
            parsed.value::<serde::de::IgnoredAny>(&limits).map_err(describe)?;
            if parsed.header.serializer == larder_format::Serializer::MsgPack {
                let payload = parsed.payload(&limits).map_err(describe)?;
                if larder_format::msgpack_walk::holds_ext(&payload, &CODE_EXT_TYPES).unwrap_or(true) {
                    return Err(
                        "the value holds a pickle or Marshal dump (ext 80 or 101), which makes its reader run code; \
                         the admin API never stores one (write it from the app that signs it, spec/FORMAT.md §2)"
                            .into(),
                    );
                }
            }
            Ok(Kind::Value)
        }
    }
}

/// Keys that `safe_key` hashed cannot be read back as URLs.
fn is_hashed(key: &str) -> bool {
    key.len() > 65
        && key.as_bytes()[key.len() - 65] == b'#'
        && key[key.len() - 64..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// `scheme://authority/path?query` into scheme, authority and path-and-query (`/` when empty).
fn split_url(url: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    Some((scheme, authority, if path.is_empty() { "/" } else { path }))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A store call that failed: the caller's mistake (a key or prefix no store takes) is a 400, anything else the
/// store's (502).
fn store_failure(e: &larder_cache::CacheError) -> Response<ProxyBody> {
    let status = match e {
        larder_cache::CacheError::Store(inner) if matches!(**inner, larder_store::StoreError::InvalidKey { .. }) => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::BAD_GATEWAY,
    };
    error(status, &e.to_string())
}

/// 405 with the methods the endpoint takes.
fn not_allowed(methods: &'static str) -> Response<ProxyBody> {
    let mut response = error(StatusCode::METHOD_NOT_ALLOWED, &format!("this endpoint takes {methods}"));
    response.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static(methods));
    response
}

fn error(status: StatusCode, message: &str) -> Response<ProxyBody> {
    respond::json(status, json!({ "error": message }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_the_token_exact() {
        let value = |v: &'static str| HeaderValue::from_static(v);
        assert!(bearer_matches(Some(&value("Bearer s3cret")), "s3cret"));
        assert!(bearer_matches(Some(&value("bearer s3cret")), "s3cret"));
        assert!(bearer_matches(Some(&value("BEARER  s3cret")), "s3cret"));
        assert!(!bearer_matches(Some(&value("Bearer s3cre")), "s3cret"));
        assert!(!bearer_matches(Some(&value("Basic s3cret")), "s3cret"));
        assert!(!bearer_matches(Some(&value("Bearers3cret")), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }

    #[test]
    fn hashed_keys_are_recognised() {
        let hashed = larder_format::key::safe_key(&format!("GET:http://a/{}", "x".repeat(300)));
        assert!(is_hashed(&hashed));
        assert!(!is_hashed("GET:http://a/x"));
    }
}
