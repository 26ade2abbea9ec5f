//! The admin API, on its own listener (loopback unless configured, and then only with a bearer token):
//!
//! - `PUT /entries/{key}` stores entry bytes (spec/FORMAT.md) that any language produced: an app can push a
//!   pre-rendered page and larder serves it without asking the app. `GET` reads one back, `DELETE` removes it.
//! - `POST /purge` with `{"url": …}`, `{"prefix": …}` or `{"tag": …}` removes entries.
//! - `GET /metrics` (Prometheus text) and `GET /health`.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use larder_format::Entry;
use larder_store::Store;
use percent_encoding::percent_decode_str;
use serde::Deserialize;

use crate::body::{collect_up_to, Collected, ProxyBody};
use crate::handler::Proxy;
use crate::metrics::Metrics;

/// Largest entry accepted by PUT.
const MAX_PUT: usize = 256 << 20;

/// A purge request: exactly one of the three.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PurgeRequest {
    url: Option<String>,
    prefix: Option<String>,
    tag: Option<String>,
}

pub struct Admin<S> {
    proxy: Arc<Proxy<S>>,
    token: Option<String>,
}

impl<S: Store> Admin<S> {
    pub fn new(proxy: Arc<Proxy<S>>, token: Option<String>) -> Admin<S> {
        Admin { proxy, token: token.filter(|t| !t.is_empty()) }
    }

    pub async fn handle(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let path = request.uri().path().to_owned();
        if path == "/health" && request.method() == Method::GET {
            return text(StatusCode::OK, "ok\n");
        }
        if let Some(token) = &self.token {
            let expected = format!("Bearer {token}");
            let given = request.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes);
            if !given.is_some_and(|g| constant_time_eq(g, expected.as_bytes())) {
                let mut response = json(StatusCode::UNAUTHORIZED, r#"{"error":"a bearer token is required"}"#);
                response.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer"));
                return response;
            }
        }
        let method = request.method().clone();
        match (method, path.as_str()) {
            (Method::GET, "/metrics") => {
                let stats = self.proxy.cache().store().stats().await.unwrap_or_default();
                let mut response = text(StatusCode::OK, &self.proxy.metrics().render(&stats));
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
                response
            }
            (Method::POST, "/purge") => self.purge(request).await,
            (method, p) if p.starts_with("/entries/") => {
                let raw = &p["/entries/".len()..];
                let Ok(key) = percent_decode_str(raw).decode_utf8() else {
                    return json(StatusCode::BAD_REQUEST, r#"{"error":"the key is not UTF-8"}"#);
                };
                let key = key.into_owned();
                match method {
                    Method::PUT => self.put(&key, request).await,
                    Method::GET => self.get(&key).await,
                    Method::DELETE => self.delete(&key).await,
                    _ => json(StatusCode::METHOD_NOT_ALLOWED, r#"{"error":"use PUT, GET or DELETE"}"#),
                }
            }
            _ => json(StatusCode::NOT_FOUND, r#"{"error":"no such endpoint"}"#),
        }
    }

    async fn put(&self, key: &str, request: Request<Incoming>) -> Response<ProxyBody> {
        let body = match collect_up_to(request.into_body(), MAX_PUT).await {
            Ok(Collected::Whole(body)) => body,
            Ok(Collected::TooLarge(..)) => {
                return json(StatusCode::PAYLOAD_TOO_LARGE, r#"{"error":"entry too large"}"#)
            }
            Err(e) => return error_json(StatusCode::BAD_REQUEST, &format!("cannot read the body: {e}")),
        };
        if let Err(e) = validate(&body) {
            return error_json(StatusCode::BAD_REQUEST, &format!("invalid entry: {}: {}", e.kind(), e.detail()));
        }
        match self.proxy.cache().store().set(key, &body, None).await {
            Ok(()) => {
                Metrics::bump(&self.proxy.metrics().stored);
                json(StatusCode::CREATED, r#"{"stored":true}"#)
            }
            Err(e) => error_json(StatusCode::INSUFFICIENT_STORAGE, &e.to_string()),
        }
    }

    async fn get(&self, key: &str) -> Response<ProxyBody> {
        match self.proxy.cache().store().get(key).await {
            Ok(Some(value)) => {
                let mut response = Response::new(ProxyBody::full(value.to_bytes()));
                response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
                response
            }
            Ok(None) => json(StatusCode::NOT_FOUND, r#"{"error":"no such entry"}"#),
            Err(e) => error_json(StatusCode::BAD_GATEWAY, &e.to_string()),
        }
    }

    async fn delete(&self, key: &str) -> Response<ProxyBody> {
        match self.proxy.cache().store().delete(key).await {
            Ok(true) => {
                let mut response = Response::new(ProxyBody::empty());
                *response.status_mut() = StatusCode::NO_CONTENT;
                response
            }
            Ok(false) => json(StatusCode::NOT_FOUND, r#"{"error":"no such entry"}"#),
            Err(e) => error_json(StatusCode::BAD_GATEWAY, &e.to_string()),
        }
    }

    async fn purge(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let body = match collect_up_to(request.into_body(), 64 << 10).await {
            Ok(Collected::Whole(body)) => body,
            _ => return json(StatusCode::BAD_REQUEST, r#"{"error":"expected a small JSON body"}"#),
        };
        let purge: PurgeRequest = match serde_json::from_slice(&body) {
            Ok(p) => p,
            Err(e) => return error_json(StatusCode::BAD_REQUEST, &format!("bad purge request: {e}")),
        };
        let store = self.proxy.cache().store();
        let result = match (purge.url, purge.prefix, purge.tag) {
            (Some(url), None, None) => match split_url(&url) {
                // larder keys requests by the scheme it serves (http), whatever scheme the caller names.
                Some((authority, path)) => store.delete(&self.proxy.key_for(authority, path)).await.map(usize::from),
                None => return error_json(StatusCode::BAD_REQUEST, &format!("not an absolute URL: {url:?}")),
            },
            (None, Some(prefix), None) => store.purge_prefix(&prefix).await,
            (None, None, Some(tag)) => store.purge_tag(&tag).await,
            _ => return json(StatusCode::BAD_REQUEST, r#"{"error":"give exactly one of url, prefix, tag"}"#),
        };
        match result {
            Ok(n) => {
                self.proxy.metrics().purged.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                json(StatusCode::OK, &format!("{{\"purged\":{n}}}"))
            }
            Err(e) => error_json(StatusCode::BAD_GATEWAY, &e.to_string()),
        }
    }
}

/// An entry is accepted only if it decodes completely: an HTTP response entry as a response, a value entry's
/// payload through decompression (and MessagePack structure), so nothing unservable sits in the store.
fn validate(entry: &[u8]) -> Result<(), larder_format::DecodeError> {
    let parsed = Entry::parse(entry)?;
    let limits = larder_format::DecodeLimits::default();
    match parsed.header.kind {
        larder_format::Kind::Response => {
            larder_format::decode_response(&Bytes::copy_from_slice(entry), &limits).map(|_| ())
        }
        larder_format::Kind::Value => parsed.value::<serde::de::IgnoredAny>(&limits).map(|_| ()),
    }
}

/// `scheme://authority/path?query` into authority (without the scheme's default port) and path-and-query.
fn split_url(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (mut authority, path) = rest.split_at(end);
    if scheme.eq_ignore_ascii_case("https") {
        authority = authority.strip_suffix(":443").unwrap_or(authority);
    }
    Some((authority, if path.is_empty() { "/" } else { path }))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn text(status: StatusCode, body: &str) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn json(status: StatusCode, body: &str) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(Bytes::from(format!("{body}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error_json(status: StatusCode, message: &str) -> Response<ProxyBody> {
    json(status, &serde_json::json!({ "error": message }).to_string())
}
