//! The request path: look the request up; serve a fresh hit; serve stale while revalidating when allowed; fill a
//! miss from the upstream with one request per key however many clients ask at once; pass everything else through
//! and invalidate what unsafe methods change.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    HeaderName, AGE, AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, DATE, HOST, IF_MODIFIED_SINCE, IF_NONE_MATCH,
    IF_RANGE, RANGE,
};
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use larder_cache::coalesce::{self, Role};
use larder_cache::Cache;
use larder_format::key::{http_key, KeyOptions};
use larder_format::ContentEncoding;
use larder_store::{Clock, Store};

use crate::body::{collect_up_to, Collected, ProxyBody};
use crate::config::ProxyConfig;
use crate::metrics::Metrics;
use crate::respond::{self, CacheStatus};
use crate::rfc9111::cache_control::Directives;
use crate::rfc9111::{conditional, invalidation, Rules};
use crate::stored::{self, Stored};
use crate::upstream::{Upstream, UpstreamError};

/// The caching proxy: shared by every connection.
pub struct Proxy<S> {
    pub(crate) cache: Cache<S>,
    pub(crate) rules: Rules,
    pub(crate) metrics: Metrics,
    upstream: Upstream,
    key_options: KeyOptions,
    upstream_authority: String,
    status_header: HeaderName,
    purge_allowed: Vec<std::net::IpAddr>,
    max_body: usize,
    max_request_body: u64,
    compress: Option<ContentEncoding>,
    clock: Arc<dyn Clock>,
    wait_limit: Duration,
}

impl<S: Store> Proxy<S> {
    pub fn new(config: &ProxyConfig, store: S, clock: Arc<dyn Clock>) -> Result<Proxy<S>, crate::config::ConfigError> {
        config.validate()?;
        let upstream_uri: Uri =
            config.upstream.parse().map_err(|_| crate::config::ConfigError::Upstream(config.upstream.clone()))?;
        let limits = &config.limits;
        Ok(Proxy {
            cache: Cache::builder(store).clock(clock.clone()).build(),
            rules: config.rules(),
            metrics: Metrics::default(),
            upstream: Upstream::new(
                &upstream_uri,
                Duration::from_secs(limits.upstream_connect_timeout_secs),
                Duration::from_secs(limits.upstream_timeout_secs),
            ),
            key_options: KeyOptions {
                namespace: config.namespace.clone(),
                drop_params: config.drop_query_params.clone(),
            },
            upstream_authority: upstream_uri.authority().map_or_else(String::new, |a| a.to_string()),
            status_header: HeaderName::try_from(config.cache_status_header.as_str())
                .unwrap_or(HeaderName::from_static("x-cache")),
            purge_allowed: config.purge_allowed.clone(),
            max_body: config.cache.max_body_bytes,
            max_request_body: limits.max_request_body_bytes,
            compress: crate::encoding::store_coding(&config.cache.compress),
            clock,
            wait_limit: Duration::from_secs(limits.upstream_timeout_secs + 1),
        })
    }

    pub fn cache(&self) -> &Cache<S> {
        &self.cache
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn key_options(&self) -> &KeyOptions {
        &self.key_options
    }

    /// The store key for a request to `authority` + `path_and_query` (GET and HEAD share it).
    pub fn key_for(&self, authority: &str, path_and_query: &str) -> String {
        http_key("GET", "http", authority, path_and_query, &self.key_options)
    }

    /// Handles one client request.
    pub async fn handle(self: &Arc<Self>, request: Request<Incoming>, client: SocketAddr) -> Response<ProxyBody> {
        let authority = request
            .headers()
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| request.uri().authority().map(|a| a.to_string()))
            .unwrap_or_else(|| self.upstream_authority.clone());
        let path = request.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
        if request.method().as_str() == "PURGE" {
            return self.purge(&authority, &path, client).await;
        }
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return self.bypass(request, &authority, &path, client).await;
        }
        let key = self.key_for(&authority, &path);
        let (parts, _) = request.into_parts();
        let method = parts.method.clone();
        let headers = parts.headers;
        let now = self.clock.now_ms();
        if let Some(stored) = stored::lookup(&self.cache, &key, &headers).await {
            if self.reusable_for(&stored, &headers) {
                if stored.is_fresh(now)
                    && !self.rules.request_requires_validation(&headers, stored.age_seconds(now) * 1000)
                {
                    Metrics::bump(&self.metrics.hits);
                    return respond::from_stored(
                        &stored,
                        &method,
                        &headers,
                        now,
                        &self.status_header,
                        CacheStatus::Hit,
                    );
                }
                return self.serve_stale(stored, &method, &headers, &path, client, &key).await;
            }
        }
        Metrics::bump(&self.metrics.misses);
        if method == Method::HEAD || headers.contains_key(AUTHORIZATION) {
            // HEAD responses are not stored, and a request with credentials does not share a fill with others.
            return self.fill(&method, &headers, &path, client, &key, None).await.0;
        }
        self.fill_coalesced(&method, &headers, &path, client, &key).await
    }

    /// RFC 9111 §3.5: a response stored for a request with Authorization is reused only if it said so.
    fn reusable_for(&self, stored: &Stored, request: &HeaderMap) -> bool {
        if !request.contains_key(AUTHORIZATION) {
            return true;
        }
        let d = Directives::parse(stored.headers.get_all(CACHE_CONTROL));
        d.public || d.must_revalidate || d.s_maxage.is_some()
    }

    /// One upstream request per key: the first miss leads, the others wait and then read what it stored.
    async fn fill_coalesced(
        self: &Arc<Self>,
        method: &Method,
        headers: &HeaderMap,
        path: &str,
        client: SocketAddr,
        key: &str,
    ) -> Response<ProxyBody> {
        for _ in 0..3 {
            match self.cache.coalescer().join_or_lead(key) {
                Role::Lead(lead) => {
                    let (response, stored) = self.fill(method, headers, path, client, key, None).await;
                    lead.finish(Ok(Arc::new(stored)));
                    return response;
                }
                Role::Wait(rx) => {
                    Metrics::bump(&self.metrics.coalesced_waits);
                    let outcome = tokio::time::timeout(self.wait_limit, coalesce::wait(rx)).await.ok().flatten();
                    let stored = outcome.and_then(|o| o.ok()).and_then(|v| v.downcast_ref::<bool>().copied());
                    match stored {
                        Some(true) => {
                            if let Some(hit) = stored::lookup(&self.cache, key, headers).await {
                                let now = self.clock.now_ms();
                                if hit.is_fresh(now) {
                                    return respond::from_stored(
                                        &hit,
                                        method,
                                        headers,
                                        now,
                                        &self.status_header,
                                        CacheStatus::Hit,
                                    );
                                }
                            }
                            break;
                        }
                        // Not storable, or the leader failed: this request goes upstream on its own.
                        Some(false) => break,
                        // The leader went away: try again, perhaps as the leader.
                        None => continue,
                    }
                }
            }
        }
        self.fill(method, headers, path, client, key, None).await.0
    }

    /// Fetches from the upstream and stores what may be stored. `stale` is a stored response that may stand in if
    /// the upstream fails (stale-if-error). Returns the response and whether something was stored.
    async fn fill(
        self: &Arc<Self>,
        method: &Method,
        headers: &HeaderMap,
        path: &str,
        client: SocketAddr,
        key: &str,
        stale: Option<&Stored>,
    ) -> (Response<ProxyBody>, bool) {
        // Ask for the whole response so it can be stored; the client's own validators are answered from it.
        let mut upstream_headers = headers.clone();
        if *method == Method::GET {
            for name in [IF_NONE_MATCH, IF_MODIFIED_SINCE, RANGE, IF_RANGE] {
                upstream_headers.remove(name);
            }
        }
        let request_time = self.clock.now_ms();
        let result =
            self.upstream.send(method.clone(), path, &upstream_headers, Some(client), &[], ProxyBody::empty()).await;
        let upstream = match self.recorded(result) {
            Ok(response) => response,
            Err(error) => return (self.stale_or_error(stale, method, headers, error), false),
        };
        self.absorb(upstream, stale, method, headers, key, request_time).await
    }

    /// A response just prepared for the store, read back as a stored one (so it is served exactly as a hit is).
    fn served_form(&self, key: String, prepared: stored::ToStore) -> Stored {
        let headers = stored::header_map(&prepared.response.headers);
        Stored { meta: prepared.meta, response: prepared.response, key, headers }
    }

    /// A stale stored response: served at once while it is revalidated in the background, if allowed; otherwise
    /// revalidated now (with its validators), falling back to it if the upstream fails within stale-if-error.
    async fn serve_stale(
        self: &Arc<Self>,
        stored: Stored,
        method: &Method,
        headers: &HeaderMap,
        path: &str,
        client: SocketAddr,
        key: &str,
    ) -> Response<ProxyBody> {
        let now = self.clock.now_ms();
        let allowance = self.rules.stale_allowance_of(&stored.headers);
        let stale_for = stored.staleness_ms(now);
        if stale_for < allowance.while_revalidate.as_millis() as u64
            && !self.rules.request_requires_validation(headers, u64::MAX)
        {
            Metrics::bump(&self.metrics.stale_served);
            let response = respond::from_stored(&stored, method, headers, now, &self.status_header, CacheStatus::Stale);
            self.revalidate_in_background(stored, headers.clone(), path.to_owned(), client, key.to_owned());
            return response;
        }
        Metrics::bump(&self.metrics.misses);
        self.revalidate(&stored, method, headers, path, client, key).await.0
    }

    fn revalidate_in_background(
        self: &Arc<Self>,
        stored: Stored,
        headers: HeaderMap,
        path: String,
        client: SocketAddr,
        key: String,
    ) {
        let proxy = Arc::clone(self);
        tokio::spawn(async move {
            let Some(lead) = proxy.cache.coalescer().try_lead(&key) else { return };
            let (_, refreshed) = proxy.revalidate(&stored, &Method::GET, &headers, &path, client, &key).await;
            lead.finish(Ok(Arc::new(refreshed)));
        });
    }

    /// Sends a conditional request for a stored response; a 304 refreshes it, anything else replaces it.
    async fn revalidate(
        self: &Arc<Self>,
        stored: &Stored,
        method: &Method,
        headers: &HeaderMap,
        path: &str,
        client: SocketAddr,
        key: &str,
    ) -> (Response<ProxyBody>, bool) {
        let validators = conditional::validators(&stored.headers);
        if validators.is_empty() {
            return self.fill(method, headers, path, client, key, Some(stored)).await;
        }
        Metrics::bump(&self.metrics.revalidations);
        let mut upstream_headers = headers.clone();
        for name in [IF_NONE_MATCH, IF_MODIFIED_SINCE, RANGE, IF_RANGE] {
            upstream_headers.remove(name);
        }
        let request_time = self.clock.now_ms();
        let result = self
            .upstream
            .send(Method::GET, path, &upstream_headers, Some(client), &validators, ProxyBody::empty())
            .await;
        let upstream = match self.recorded(result) {
            Ok(response) => response,
            Err(error) => return (self.stale_or_error(Some(stored), method, headers, error), false),
        };
        if upstream.status() != StatusCode::NOT_MODIFIED {
            // A new response: handle it as a fill would, with the stored one as the stale fallback.
            return self.absorb(upstream, Some(stored), method, headers, key, request_time).await;
        }
        let response_time = self.clock.now_ms();
        // The stored Age described the old response; the 304 brings its own Date (or arrives now) and Age.
        let mut base = stored.headers.clone();
        base.remove(AGE);
        let mut merged = conditional::merge_304(&base, upstream.headers());
        if !upstream.headers().contains_key(DATE) {
            if let Ok(date) = http::HeaderValue::from_str(&crate::rfc9111::freshness::format_http_date(response_time)) {
                merged.insert(DATE, date);
            }
        }
        let plan = self.rules.storage(&Method::GET, headers, stored.status(), &merged, request_time, response_time);
        let mut refreshed = stored.clone();
        refreshed.headers = merged;
        let now = self.clock.now_ms();
        let Ok(plan) = plan else {
            // The update says it may no longer be stored: serve it this once and drop the stored copy.
            let _ = self.cache.store().delete(&stored.key).await;
            return (
                respond::from_stored(&refreshed, method, headers, now, &self.status_header, CacheStatus::Miss),
                false,
            );
        };
        let prepared = stored::prepare(
            refreshed.status(),
            &refreshed.headers,
            refreshed.response.body.clone(),
            &plan,
            response_time,
            None,
        );
        // prepare() moved a transformable Content-Encoding out of the headers; the body keeps its stored coding.
        let mut response = prepared.response;
        response.content_encoding = stored.response.content_encoding;
        let ok = stored::restore(&self.cache, &stored.key, &response, &prepared.meta).await;
        let served = self.served_form(stored.key.clone(), stored::ToStore { response, meta: prepared.meta });
        (respond::from_stored(&served, method, headers, now, &self.status_header, CacheStatus::Hit), ok)
    }

    /// What to do with an upstream response to a fill or a revalidation: a 5xx may be covered by `stale` within
    /// stale-if-error; a storable response is read (up to the body limit), stored and served as a hit would be;
    /// anything else is passed through. A stale response that the new one cannot replace is dropped.
    async fn absorb(
        self: &Arc<Self>,
        upstream: Response<Incoming>,
        stale: Option<&Stored>,
        method: &Method,
        headers: &HeaderMap,
        key: &str,
        request_time: u64,
    ) -> (Response<ProxyBody>, bool) {
        if upstream.status().is_server_error() {
            if let Some(stale) = stale.filter(|s| self.within_stale_if_error(s)) {
                Metrics::bump(&self.metrics.stale_served);
                let now = self.clock.now_ms();
                let response =
                    respond::from_stored(stale, method, headers, now, &self.status_header, CacheStatus::Stale);
                return (response, false);
            }
        }
        let response_time = self.clock.now_ms();
        let status = upstream.status();
        let plan = self.rules.storage(method, headers, status, upstream.headers(), request_time, response_time);
        let Ok(plan) = plan else {
            self.drop_stale(stale).await;
            return (respond::passed_through(upstream, &self.status_header, CacheStatus::Miss), false);
        };
        let (parts, body) = upstream.into_parts();
        let body = match collect_up_to(body, self.max_body).await {
            Ok(Collected::Whole(body)) => body,
            Ok(Collected::TooLarge(prefix, rest)) => {
                self.drop_stale(stale).await;
                let body = ProxyBody::Prefixed(Some(prefix), rest);
                return (respond::with_parts(parts, body, &self.status_header, CacheStatus::Miss), false);
            }
            Err(_) => {
                Metrics::bump(&self.metrics.upstream_errors);
                let response =
                    respond::error(StatusCode::BAD_GATEWAY, "upstream response broke off", &self.status_header);
                return (response, false);
            }
        };
        let prepared = stored::prepare(parts.status, &parts.headers, body, &plan, response_time, self.compress);
        let stored_key = stored::store(&self.cache, key, headers, &plan.vary, &prepared).await;
        if stored_key.is_some() {
            Metrics::bump(&self.metrics.stored);
        }
        let served = self.served_form(stored_key.clone().unwrap_or_else(|| key.to_owned()), prepared);
        let now = self.clock.now_ms();
        let response = respond::from_stored(&served, method, headers, now, &self.status_header, CacheStatus::Miss);
        (response, stored_key.is_some())
    }

    /// Removes a stored response that a newer, unstorable one supersedes.
    async fn drop_stale(&self, stale: Option<&Stored>) {
        if let Some(stale) = stale {
            let _ = self.cache.store().delete(&stale.key).await;
        }
    }

    /// Counts an upstream round trip in the metrics (its latency, or its failure).
    fn recorded(
        &self,
        result: Result<(Response<Incoming>, Duration), UpstreamError>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        match result {
            Ok((response, elapsed)) => {
                self.metrics.observe_upstream(elapsed);
                Ok(response)
            }
            Err(error) => {
                Metrics::bump(&self.metrics.upstream_errors);
                Err(error)
            }
        }
    }

    fn within_stale_if_error(&self, stored: &Stored) -> bool {
        let allowance = self.rules.stale_allowance_of(&stored.headers);
        stored.staleness_ms(self.clock.now_ms()) < allowance.if_error.as_millis() as u64
    }

    /// The upstream failed: a stale response if one may stand in, else 502 (unreachable) or 504 (too slow).
    fn stale_or_error(
        &self,
        stale: Option<&Stored>,
        method: &Method,
        headers: &HeaderMap,
        error: UpstreamError,
    ) -> Response<ProxyBody> {
        if let Some(stale) = stale.filter(|s| self.within_stale_if_error(s)) {
            Metrics::bump(&self.metrics.stale_served);
            let now = self.clock.now_ms();
            return respond::from_stored(stale, method, headers, now, &self.status_header, CacheStatus::Stale);
        }
        tracing::warn!(%error, "upstream request failed");
        match error {
            UpstreamError::Timeout(_) => {
                respond::error(StatusCode::GATEWAY_TIMEOUT, "upstream timed out", &self.status_header)
            }
            UpstreamError::BodyTooLarge(e) => {
                respond::error(StatusCode::PAYLOAD_TOO_LARGE, &e.to_string(), &self.status_header)
            }
            UpstreamError::Unreachable(_) => {
                respond::error(StatusCode::BAD_GATEWAY, "upstream unreachable", &self.status_header)
            }
        }
    }

    /// Methods other than GET and HEAD: streamed both ways, and unsafe ones invalidate what they may change.
    async fn bypass(
        self: &Arc<Self>,
        request: Request<Incoming>,
        authority: &str,
        path: &str,
        client: SocketAddr,
    ) -> Response<ProxyBody> {
        Metrics::bump(&self.metrics.bypasses);
        let declared =
            request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > self.max_request_body) {
            let message = format!("request body exceeds the {}-byte limit", self.max_request_body);
            return respond::error(StatusCode::PAYLOAD_TOO_LARGE, &message, &self.status_header);
        }
        let (parts, body) = request.into_parts();
        let body = ProxyBody::Limited { inner: body, remaining: self.max_request_body };
        let result = self.upstream.send(parts.method.clone(), path, &parts.headers, Some(client), &[], body).await;
        let upstream = match self.recorded(result) {
            Ok(response) => response,
            Err(error) => return self.stale_or_error(None, &parts.method, &parts.headers, error),
        };
        for target in invalidation::targets(&parts.method, upstream.status(), authority, path, upstream.headers()) {
            let _ = self.cache.store().delete(&self.key_for(authority, &target)).await;
        }
        respond::passed_through(upstream, &self.status_header, CacheStatus::Bypass)
    }

    /// `PURGE` on the main listener, from allowed addresses: removes the stored response for the URL.
    async fn purge(&self, authority: &str, path: &str, client: SocketAddr) -> Response<ProxyBody> {
        if !self.purge_allowed.contains(&client.ip()) {
            return respond::error(
                StatusCode::FORBIDDEN,
                "PURGE is not allowed from this address",
                &self.status_header,
            );
        }
        let removed = self.cache.store().delete(&self.key_for(authority, path)).await.unwrap_or(false);
        Metrics::bump(&self.metrics.purged);
        let mut response =
            Response::new(ProxyBody::full(Bytes::from(format!("{{\"purged\":{}}}\n", u8::from(removed)))));
        *response.status_mut() = if removed { StatusCode::OK } else { StatusCode::NOT_FOUND };
        response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        response
    }
}
