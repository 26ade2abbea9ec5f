//! The proxy's shared state and its entry point: a request is checked and normalised (request.rs), routed by
//! method, handled by one of the decisions under `path/` (lookup, hit, stale, fill, bypass, purge), and answered
//! with how the cache handled it (cache_status.rs), counted once in the metrics.

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderName, HeaderValue, ALLOW, USER_AGENT};
use http::{Request, Response, StatusCode, Uri};
use hyper::body::Incoming;
use larder_cache::coalesce::InFlight;
use larder_cache::Cache;
use larder_format::key::http_key;
use larder_format::ContentEncoding;
use larder_store::{Clock, Store};
use tokio::sync::Semaphore;

use crate::access_log::{AccessLog, AccessRecord};
use crate::body::{FillBudget, ProxyBody};
use crate::cache_status::{Outcome, Verdict};
use crate::config::{ConfigError, ProxyConfig};
use crate::forwarding::Networks;
use crate::health::UpstreamHealth;
use crate::hit_for_miss::HitForMiss;
use crate::metrics::Metrics;
use crate::path::fill::FillOutcome;
use crate::request::{RequestContext, RequestRules, Route};
use crate::respond;
use crate::rfc9111::Rules;
use crate::storage::ResponseStore;
use crate::upstream::Upstream;

/// How many URLs hit-for-miss remembers at most.
const HIT_FOR_MISS_CAPACITY: usize = 65_536;
/// Stored bodies decoded or compressed at once (each bounded by the decoded-size limit).
const TRANSFORM_SLOTS: usize = 4;

/// The knobs the request path reads, from the configuration.
pub(crate) struct Settings {
    pub x_cache: HeaderName,
    pub cache_status: bool,
    /// Who may send `PURGE` on the main listener.
    pub purge_from: Networks,
    /// Largest body a fill buffers to store (the configured limit, or less if the store takes less).
    pub max_body: usize,
    /// Largest size a stored body may decode to.
    pub max_decoded: usize,
    pub max_request_body: u64,
    pub request_body_timeout: Duration,
    /// A response being stored must arrive whole within this.
    pub upstream_timeout: Duration,
    /// How long a coalesced request waits for another's fill when no stale response can stand in.
    pub wait_limit: Duration,
    /// How long a request waits for a refresh under way before the stale response answers it.
    pub stale_wait: Duration,
    pub hit_for_miss: Duration,
    /// The coding offered to clients that accept it, for identity bodies.
    pub offered_coding: Option<ContentEncoding>,
}

/// The caching proxy: shared by every connection.
pub struct Proxy<S> {
    /// Stored responses: the only way to the cache (`storage.rs`).
    pub(crate) storage: ResponseStore<S>,
    pub(crate) rules: Rules,
    pub(crate) metrics: Metrics,
    pub(crate) upstream: Upstream,
    pub(crate) health: UpstreamHealth,
    pub(crate) request_rules: RequestRules,
    pub(crate) settings: Settings,
    /// Upstream fills under way, one per key.
    pub(crate) fills: InFlight<FillOutcome>,
    /// Stored bodies being decoded or compressed, one per alternate key.
    pub(crate) transforms: InFlight<bool>,
    pub(crate) transform_slots: Arc<Semaphore>,
    pub(crate) hit_for_miss: HitForMiss,
    pub(crate) fill_budget: FillBudget,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) access_log: Option<AccessLog>,
}

/// A response and how the cache handled the request.
pub struct Served {
    pub response: Response<ProxyBody>,
    pub verdict: Verdict,
    /// What the access log needs, if it is on.
    pub record: Option<AccessRecord>,
}

impl<S: Store> Proxy<S> {
    pub fn new(config: &ProxyConfig, store: S, clock: Arc<dyn Clock>) -> Result<Proxy<S>, ConfigError> {
        config.validate()?;
        let upstream_uri: Uri = config.upstream.parse().map_err(|_| ConfigError::Upstream(config.upstream.clone()))?;
        let limits = &config.limits;
        let invalid = |field: &'static str| move |message: String| ConfigError::Invalid { field, message };
        let trusted_proxies = Networks::parse(&config.trusted_proxies).map_err(invalid("trusted_proxies"))?;
        let purge_from = Networks::parse(&config.purge_from).map_err(invalid("purge_from"))?;
        let access_log = match config.access_log.as_str() {
            "" => None,
            target => Some(AccessLog::open(target).map_err(invalid("access_log"))?),
        };
        let cache = Cache::builder(store).clock(clock.clone()).outage_memory(config.cache.outage_memory_bytes).build();
        let max_body = config.cache.max_body_bytes.min(cache.max_entry_bytes());
        let upstream_timeout = Duration::from_secs(limits.upstream_timeout_secs);
        Ok(Proxy {
            rules: config.rules(),
            metrics: Metrics::default(),
            upstream: Upstream::new(
                &upstream_uri,
                Duration::from_secs(limits.upstream_connect_timeout_secs),
                upstream_timeout,
                Duration::from_secs(limits.upstream_idle_timeout_secs),
            ),
            health: UpstreamHealth::default(),
            request_rules: RequestRules {
                key_options: larder_format::key::KeyOptions {
                    namespace: config.namespace.clone(),
                    drop_params: config.drop_query_params.clone(),
                },
                trusted_proxies,
            },
            settings: Settings {
                x_cache: HeaderName::try_from(config.cache_status_header.as_str())
                    .unwrap_or(HeaderName::from_static("x-cache")),
                cache_status: config.cache_status,
                purge_from,
                max_body,
                max_decoded: config.cache.max_body_bytes,
                max_request_body: limits.max_request_body_bytes,
                request_body_timeout: Duration::from_secs(limits.request_body_timeout_secs),
                upstream_timeout,
                wait_limit: upstream_timeout + Duration::from_secs(1),
                stale_wait: Duration::from_millis(config.cache.stale_wait_ms),
                hit_for_miss: Duration::from_secs(config.cache.hit_for_miss_secs),
                offered_coding: crate::encoding::offered_coding(&config.cache.compress).unwrap_or(None),
            },
            fills: InFlight::default(),
            transforms: InFlight::default(),
            transform_slots: Arc::new(Semaphore::new(TRANSFORM_SLOTS)),
            hit_for_miss: HitForMiss::new(HIT_FOR_MISS_CAPACITY),
            fill_budget: FillBudget::new(config.fill_buffer_bytes()),
            storage: ResponseStore::new(cache),
            clock,
            access_log,
        })
    }

    /// Stored responses, and the store under them.
    pub fn storage(&self) -> &ResponseStore<S> {
        &self.storage
    }

    /// Upstream fills under way (one per key, however many requests wait for each).
    pub fn fills_under_way(&self) -> usize {
        self.fills.len()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The store key for `GET scheme://authority` + `target`, as requests are keyed.
    pub fn url_key(&self, scheme: &str, authority: &str, target: &str) -> String {
        http_key("GET", scheme, authority, target, &self.request_rules.key_options)
    }

    /// The store key for a request to `http://authority` + `path_and_query` (GET and HEAD share it).
    pub fn key_for(&self, authority: &str, path_and_query: &str) -> String {
        self.url_key("http", authority, path_and_query)
    }

    /// The key namespace.
    pub fn namespace(&self) -> &str {
        &self.request_rules.key_options.namespace
    }

    /// Handles one client request from `client`, whose connection may have `slots` upstream requests under way.
    pub async fn handle(
        self: &Arc<Self>,
        request: Request<Incoming>,
        client: std::net::SocketAddr,
        slots: &Arc<Semaphore>,
    ) -> Served {
        let (parts, body) = request.into_parts();
        let mut record = self.access_log.as_ref().map(|_| AccessRecord::started(&parts, client));
        let (mut response, verdict) = match RequestContext::parse(parts, client, &self.request_rules) {
            Err(rejection) => {
                let mut response = respond::error(rejection.status, rejection.message);
                if rejection.status == StatusCode::METHOD_NOT_ALLOWED {
                    response.headers_mut().insert(ALLOW, HeaderValue::from_static(ALLOWED));
                }
                (response, Verdict::new(Outcome::Local).with_detail(rejection.detail))
            }
            Ok((mut ctx, route)) => {
                if let Some(record) = &mut record {
                    record.url = ctx.url();
                    record.user_agent = ctx.headers.get(USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_owned);
                }
                ctx.upstream_slots = Some(slots.clone());
                match route {
                    Route::Cacheable => self.serve_cacheable(&ctx).await,
                    Route::Forward => self.forward(&ctx, body).await,
                    Route::Purge => self.purge_request(&ctx).await,
                    Route::ServerOptions => {
                        let mut response = Response::new(ProxyBody::empty());
                        response.headers_mut().insert(ALLOW, HeaderValue::from_static(ALLOWED));
                        (response, Verdict::new(Outcome::Local).with_detail("server-options"))
                    }
                }
            }
        };
        verdict.apply(response.headers_mut(), &self.settings.x_cache, self.settings.cache_status);
        self.metrics.count(verdict.outcome);
        Served { response, verdict, record }
    }

    /// Where an access record goes when its response is finished.
    pub fn access_log(&self) -> Option<&AccessLog> {
        self.access_log.as_ref()
    }

    /// Records an upstream answer (or failure) in the metrics and the health the admin API reports.
    pub(crate) fn record_upstream<T>(&self, result: &Result<(T, Duration), crate::upstream::UpstreamError>) {
        use crate::upstream::UpstreamError;
        let now = self.clock.now_ms();
        match result {
            Ok((_, elapsed)) => {
                self.metrics.observe_upstream(*elapsed);
                self.health.answered(now);
            }
            Err(error @ (UpstreamError::Unreachable(_) | UpstreamError::Timeout(_))) => {
                Metrics::bump(&self.metrics.upstream_errors);
                self.health.failed(now, &error.to_string());
            }
            // The client's fault, not the upstream's.
            Err(UpstreamError::BodyTooLarge(_) | UpstreamError::ClientBody(_)) => {}
        }
    }
}

/// What `Allow` lists for `OPTIONS *` and a refused CONNECT.
const ALLOWED: &str = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
