//! Going upstream for a cacheable request, and storing what comes back when it may be stored.
//!
//! - **One request per key, whatever the store does.** The first request for a key leads; the others wait for its
//!   outcome and are served the leader's response from memory when their request selects the same variant (they
//!   are *collapsed*; a store that is failing or slow does not undo this, spec/STORES.md §3 "When the store
//!   fails"), read the store for another variant, go upstream on their own when the response may not be stored,
//!   or share the leader's failure. A URL whose response could not be stored is remembered (hit_for_miss.rs), and its later
//!   requests go upstream at once, in parallel, instead of queueing behind a leader.
//! - **The fill outlives the client.** It runs in a task of its own, so a client that goes away does not waste the
//!   upstream's work or leave waiters to start over, and a client with a stale copy to fall back on can be answered
//!   from it while the fill carries on.
//! - **Bounded.** A response is buffered for the store only up to the largest storable body, within a byte budget
//!   shared by every fill, and within the upstream timeout; past any of them it streams to the client uncached. A
//!   compressed body is stored only if it decodes within the limit.
//! - **Stale responses are refreshed here too**, with their validators: a 304 refreshes the stored copy.

use std::sync::Arc;
use std::time::Duration;

use http::header::{AGE, CONTENT_ENCODING, DATE, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, RANGE};
use http::{HeaderValue, Method, Response, StatusCode};
use larder_cache::coalesce::{Lead, Role, Waiter};
use larder_cache::LockState;
use larder_format::ContentEncoding;
use larder_store::Store;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use super::lookup::ttl_seconds;
use super::Answer;
use crate::body::{collect_up_to, CollectError, Collected, ProxyBody, RequestBody, StreamReason, UpstreamBody};
use crate::cache_status::{Fwd, Outcome, Verdict};
use crate::handler::Proxy;
use crate::metrics::Metrics;
use crate::request::RequestContext;
use crate::respond;
use crate::rfc9111::{conditional, freshness, NotStored};
use crate::stored::{self, FoundMarker, Lookup, Stored};
use crate::upstream::UpstreamError;

/// Bodies smaller than this are checked for their decoded size on the event loop; larger ones on the blocking pool.
const INLINE_DECODE_CHECK: usize = 64 << 10;

/// What a fill is for.
#[derive(Debug, Clone)]
pub(crate) struct FillPlan {
    /// The key fills coalesce on: the base key, a variant key, or the stale response's key.
    pub fill_key: String,
    /// The `Vary` marker the URL has, so a new variant joins its generation.
    pub marker: Option<FoundMarker>,
    /// The stale response being refreshed (its validators are sent; it stands in if the upstream fails).
    pub stale: Option<Stored>,
    pub fwd: Fwd,
    /// `Miss` for a fill, `Pass` for a request sent upstream without coalescing.
    pub outcome: Outcome,
    /// Why it was passed.
    pub detail: Option<&'static str>,
    /// A refresh nobody waits for (stale-while-revalidate): if another process holds the store lock, it is
    /// refreshing this response already, and this one does nothing.
    pub background: bool,
}

impl FillPlan {
    /// A request sent upstream on its own; its response is still stored if it may be.
    pub fn pass(ctx: &RequestContext, fwd: Fwd, why: &'static str, marker: Option<FoundMarker>) -> FillPlan {
        FillPlan {
            fill_key: ctx.key.clone(),
            marker,
            stale: None,
            fwd,
            outcome: Outcome::Pass,
            detail: Some(why),
            background: false,
        }
    }

    /// A request with credentials, sent upstream alone (RFC 9111 §3.5: its response is not shared with waiters).
    /// It carries no detail of its own, so `Cache-Status` says why its response was or was not stored.
    pub fn credentialed(ctx: &RequestContext, marker: Option<FoundMarker>) -> FillPlan {
        FillPlan { detail: None, ..FillPlan::pass(ctx, Fwd::Request, "authorization", marker) }
    }

    /// The refresh of a stale response.
    pub fn refresh(stale: Stored, marker: Option<FoundMarker>) -> FillPlan {
        FillPlan {
            fill_key: stale.key.clone(),
            marker,
            stale: Some(stale),
            fwd: Fwd::Stale,
            outcome: Outcome::Miss,
            detail: None,
            background: false,
        }
    }

    /// The refresh of a stale response served meanwhile (stale-while-revalidate), which nobody waits for.
    pub fn refresh_in_background(stale: Stored, marker: Option<FoundMarker>) -> FillPlan {
        FillPlan { background: true, ..FillPlan::refresh(stale, marker) }
    }
}

/// What a fill's waiters learn.
#[derive(Debug, Clone)]
pub(crate) enum FillOutcome {
    /// A storable response, whether or not the store took it: served from memory to the waiters it fits.
    Fetched(Arc<Fetched>),
    /// A response is in the store: read it.
    Stored,
    /// The response may not be stored (and the URL is remembered as such): go upstream on your own.
    Uncacheable,
    /// This response was not stored for a passing reason (the fill budget, the store): go upstream on your own.
    NotStored,
    /// The upstream failed: answer the same, or with the stale copy.
    Failed(Failure),
}

/// The leader's storable response, handed to its waiters in memory.
#[derive(Debug)]
pub(crate) struct Fetched {
    response: Stored,
    /// The request headers it varies on, and the leader's values of them: a waiter whose values are the same
    /// selects the same response (RFC 9111 §4.1); another reads the store for its own.
    vary: Vec<String>,
    selecting: Vec<Vec<HeaderValue>>,
}

impl Fetched {
    fn new(ctx: &RequestContext, response: &Stored, vary: &[String]) -> Fetched {
        Fetched { response: response.clone(), vary: vary.to_vec(), selecting: selecting(ctx, vary) }
    }

    /// The response, if it answers this request too.
    fn for_request(&self, ctx: &RequestContext) -> Option<Stored> {
        (self.vary.is_empty() || selecting(ctx, &self.vary) == self.selecting).then(|| self.response.clone())
    }
}

/// A request's values of the headers a response varies on, as sent upstream.
fn selecting(ctx: &RequestContext, vary: &[String]) -> Vec<Vec<HeaderValue>> {
    if vary.is_empty() {
        return Vec::new();
    }
    let view = ctx.vary_view(vary);
    vary.iter().map(|name| view.get_all(name.as_str()).iter().cloned().collect()).collect()
}

/// An upstream failure as clients are told of it.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub status: StatusCode,
    pub message: String,
    pub detail: &'static str,
}

impl Failure {
    fn from_upstream(error: &UpstreamError) -> Failure {
        match error {
            UpstreamError::Timeout(_) => Failure {
                status: StatusCode::GATEWAY_TIMEOUT,
                message: "upstream timed out".into(),
                detail: "upstream-timeout",
            },
            _ => Failure {
                status: StatusCode::BAD_GATEWAY,
                message: "upstream unreachable".into(),
                detail: "upstream-unreachable",
            },
        }
    }
}

/// What a waiter does next.
enum Waited {
    Answer(Answer),
    /// Coalesce again, under this plan (the leader went away, or this request's variant has a key of its own).
    Again(FillPlan),
}

impl<S: Store> Proxy<S> {
    /// A fill coalesced with every other request for the same key.
    pub(crate) async fn fill_coalesced(self: &Arc<Self>, ctx: &RequestContext, mut plan: FillPlan) -> Answer {
        for _ in 0..4 {
            match self.fills.join_or_lead(&plan.fill_key) {
                Role::Lead(lead) => {
                    let rx = self.spawn_fill(ctx.clone(), plan.clone(), Some(lead));
                    return self.await_fill(ctx, &plan, rx).await;
                }
                Role::Wait(waiter) => match self.await_other(ctx, &plan, waiter).await {
                    Waited::Answer(answer) => return answer,
                    Waited::Again(next) => plan = next,
                },
            }
        }
        self.fill_alone(ctx, plan).await
    }

    /// A request sent upstream on its own, without waiting for or being waited on by others.
    pub(crate) async fn fill_alone(self: &Arc<Self>, ctx: &RequestContext, plan: FillPlan) -> Answer {
        let rx = self.spawn_fill(ctx.clone(), plan.clone(), None);
        self.await_fill(ctx, &plan, rx).await
    }

    /// Runs a fill in a task of its own; its answer arrives on the returned channel (dropping it is fine).
    pub(crate) fn spawn_fill(
        self: &Arc<Self>,
        ctx: RequestContext,
        plan: FillPlan,
        lead: Option<Lead<FillOutcome>>,
    ) -> oneshot::Receiver<Answer> {
        let (tx, rx) = oneshot::channel();
        let proxy = Arc::clone(self);
        tokio::spawn(async move {
            // The one lock policy (spec/STORES.md §3): a leader takes the store lock for a cold miss and for a
            // refresh alike.
            let (answer, outcome) = if lead.is_some() {
                proxy.fetch_once_across_processes(&ctx, &plan).await
            } else {
                proxy.fetch_and_store(&ctx, &plan).await
            };
            if matches!(outcome, FillOutcome::Uncacheable) && !proxy.settings.hit_for_miss.is_zero() {
                let now = proxy.clock.now_ms();
                let until = now.saturating_add(proxy.settings.hit_for_miss.as_millis() as u64);
                proxy.hit_for_miss.remember(&ctx.key, now, until);
            }
            if let Some(lead) = lead {
                lead.finish(outcome);
            }
            let _ = tx.send(answer);
        });
        rx
    }

    /// The answer of this request's own fill, or the stale copy if the fill is slower than `stale_wait`.
    async fn await_fill(
        self: &Arc<Self>,
        ctx: &RequestContext,
        plan: &FillPlan,
        rx: oneshot::Receiver<Answer>,
    ) -> Answer {
        match self.stale_fallback(plan) {
            Some(stale) => match tokio::time::timeout(self.settings.stale_wait, rx).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => self.serve_stale_copy(ctx, stale, "stale-if-error", None).await,
                Err(_) => self.serve_stale_copy(ctx, stale, "upstream-slow", None).await,
            },
            None => match rx.await {
                Ok(answer) => answer,
                Err(_) => (
                    respond::error(StatusCode::BAD_GATEWAY, "the upstream request failed"),
                    Verdict::forwarded(plan.outcome, plan.fwd).with_detail("fill-failed"),
                ),
            },
        }
    }

    /// Waits for another request's fill of the same key.
    async fn await_other(
        self: &Arc<Self>,
        ctx: &RequestContext,
        plan: &FillPlan,
        waiter: Waiter<FillOutcome>,
    ) -> Waited {
        let fallback = self.stale_fallback(plan);
        let limit = match fallback {
            Some(_) => self.settings.stale_wait.saturating_sub(waiter.elapsed()),
            None => self.settings.wait_limit,
        };
        let collapsed = || Verdict::forwarded(Outcome::Collapsed, plan.fwd);
        let outcome = match tokio::time::timeout(limit, waiter.wait()).await {
            Err(_) => {
                return Waited::Answer(match fallback {
                    Some(stale) => self.serve_stale_copy(ctx, stale, "upstream-slow", None).await,
                    None => (
                        respond::error(StatusCode::GATEWAY_TIMEOUT, "upstream timed out"),
                        collapsed().with_detail("upstream-timeout"),
                    ),
                });
            }
            Ok(None) => return Waited::Again(plan.clone()),
            Ok(Some(outcome)) => outcome,
        };
        match outcome {
            FillOutcome::Fetched(fetched) => {
                let now = self.clock.now_ms();
                match fetched.for_request(ctx).filter(|response| response.is_fresh(now)) {
                    Some(response) => {
                        let verdict = collapsed().with_ttl(ttl_seconds(&response, now));
                        Waited::Answer(self.serve_stored(ctx, response, verdict).await)
                    }
                    None => self.read_after_fill(ctx, plan).await,
                }
            }
            FillOutcome::Stored => self.read_after_fill(ctx, plan).await,
            FillOutcome::Uncacheable | FillOutcome::NotStored => {
                let pass =
                    FillPlan { outcome: Outcome::Pass, fwd: Fwd::Bypass, detail: Some("uncacheable"), ..plan.clone() };
                Waited::Answer(self.fill_alone(ctx, pass).await)
            }
            FillOutcome::Failed(failure) => Waited::Answer(match fallback {
                Some(stale) => self.serve_stale_copy(ctx, stale, "stale-if-error", None).await,
                None => (respond::error(failure.status, &failure.message), collapsed().with_detail(failure.detail)),
            }),
        }
    }

    /// After a fill whose response is in the store but not one this request can be served from memory: read it.
    async fn read_after_fill(self: &Arc<Self>, ctx: &RequestContext, plan: &FillPlan) -> Waited {
        let now = self.clock.now_ms();
        match self.storage.lookup(&ctx.key, |names| ctx.vary_view(names)).await {
            Lookup::Found(found, _) if found.is_fresh(now) => {
                let verdict = Verdict::forwarded(Outcome::Collapsed, plan.fwd).with_ttl(ttl_seconds(&found, now));
                Waited::Answer(self.serve_stored(ctx, *found, verdict).await)
            }
            Lookup::Missing { fill_key, marker } if fill_key != plan.fill_key => {
                Waited::Again(FillPlan { fill_key, marker, fwd: Fwd::VaryMiss, ..plan.clone() })
            }
            _ => Waited::Answer(self.fill_alone(ctx, plan.clone()).await),
        }
    }

    /// A fill (of a key no response is stored for, or a refresh of a stale one), coalesced with other processes on
    /// the same store through a store lock (spec/STORES.md §3): the process that takes it goes upstream; the others
    /// watch the store for its response and go upstream themselves only if the lock goes away without one, or after
    /// `wait_limit`; a background refresh (stale-while-revalidate) leaves the work to the holder.
    async fn fetch_once_across_processes(
        self: &Arc<Self>,
        ctx: &RequestContext,
        plan: &FillPlan,
    ) -> (Answer, FillOutcome) {
        match self.storage.try_lock(&plan.fill_key, self.settings.wait_limit).await {
            LockState::Acquired(lock) => {
                let held = self.storage.hold(lock);
                // A holder that released just before may have stored the response (spec/STORES.md §3, step 3).
                let result = match self.fresh_in_store(ctx, plan).await {
                    Some(answer) => (answer, FillOutcome::Stored),
                    None => self.fetch_and_store(ctx, plan).await,
                };
                held.release().await;
                result
            }
            LockState::Unavailable => self.fetch_and_store(ctx, plan).await,
            LockState::Held if plan.background => {
                Metrics::bump(&self.metrics.coalesced_across_processes);
                let answer = match &plan.stale {
                    Some(stale) => self.serve_stale_copy(ctx, stale, "stale-while-revalidate", None).await,
                    None => self.fetch_and_store(ctx, plan).await.0,
                };
                (answer, FillOutcome::Stored)
            }
            LockState::Held => match self.await_other_process(ctx, plan).await {
                Some(answer) => (answer, FillOutcome::Stored),
                None => self.fetch_and_store(ctx, plan).await,
            },
        }
    }

    /// Polls the store for the response another process is fetching; `None` when it gave up without one. The
    /// front does not queue for the lock when its holder leaves without a response (as `fetch` does): such a holder
    /// almost always found the response may not be stored, and its waiters then go upstream side by side.
    async fn await_other_process(self: &Arc<Self>, ctx: &RequestContext, plan: &FillPlan) -> Option<Answer> {
        let deadline = tokio::time::Instant::now() + self.settings.wait_limit;
        let mut pause = Duration::from_millis(5);
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
            if let Some(answer) = self.fresh_in_store(ctx, plan).await {
                Metrics::bump(&self.metrics.coalesced_across_processes);
                return Some(answer);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            if !self.storage.is_locked(&plan.fill_key).await {
                // The holder may have stored the response between the look above and its release.
                let stored = self.fresh_in_store(ctx, plan).await;
                if stored.is_some() {
                    Metrics::bump(&self.metrics.coalesced_across_processes);
                }
                return stored;
            }
        }
    }

    /// The answer from a fresh response the store holds for this request now, if it holds one.
    async fn fresh_in_store(self: &Arc<Self>, ctx: &RequestContext, plan: &FillPlan) -> Option<Answer> {
        let now = self.clock.now_ms();
        match self.storage.lookup(&ctx.key, |names| ctx.vary_view(names)).await {
            Lookup::Found(found, _) if found.is_fresh(now) => {
                let verdict = Verdict::forwarded(Outcome::Collapsed, plan.fwd).with_ttl(ttl_seconds(&found, now));
                Some(self.serve_stored(ctx, *found, verdict).await)
            }
            _ => None,
        }
    }

    /// One upstream request for the plan, and what became of its response.
    async fn fetch_and_store(self: &Arc<Self>, ctx: &RequestContext, plan: &FillPlan) -> (Answer, FillOutcome) {
        let method = if ctx.method == Method::HEAD { Method::HEAD } else { Method::GET };
        // A GET asks for the whole response so it can be stored; the client's own validators are answered from it.
        let omit: &[http::HeaderName] =
            if method == Method::GET { &[IF_NONE_MATCH, IF_MODIFIED_SINCE, RANGE, IF_RANGE] } else { &[] };
        let validators = plan.stale.as_ref().map(|s| conditional::validators(&s.headers)).unwrap_or_default();
        if !validators.is_empty() {
            Metrics::bump(&self.metrics.revalidations);
        }
        let mut verdict = Verdict::forwarded(plan.outcome, plan.fwd);
        verdict.detail = plan.detail;
        let request = match self.upstream.request_for(ctx, method, omit, &validators, RequestBody::Empty) {
            Ok(request) => request,
            Err(error) => return self.failed(ctx, plan, verdict, Failure::from_upstream(&error)).await,
        };
        let started = tokio::time::Instant::now();
        let request_time = self.clock.now_ms();
        let result = self.upstream.send(request, self.upstream_slot(ctx).await).await;
        self.record_upstream(&result);
        let (upstream, elapsed) = match result {
            Ok(answered) => answered,
            Err(error) => return self.failed(ctx, plan, verdict, Failure::from_upstream(&error)).await,
        };
        verdict.fwd_status = Some(upstream.status().as_u16());
        verdict.upstream_time = Some(elapsed);
        if let Some(stale) = &plan.stale {
            if upstream.status() == StatusCode::NOT_MODIFIED && !validators.is_empty() {
                return self.refreshed(ctx, stale, upstream, request_time, verdict).await;
            }
        }
        self.absorb(ctx, plan, upstream, request_time, started, verdict).await
    }

    /// The stale copy that may stand in for a failed or slow upstream now, if any.
    fn stale_fallback<'p>(&self, plan: &'p FillPlan) -> Option<&'p Stored> {
        plan.stale.as_ref().filter(|stale| self.within_stale_if_error(stale))
    }

    /// One of the connection's upstream slots (waits for one to free up).
    pub(crate) async fn upstream_slot(&self, ctx: &RequestContext) -> Option<OwnedSemaphorePermit> {
        match &ctx.upstream_slots {
            Some(slots) => slots.clone().acquire_owned().await.ok(),
            None => None,
        }
    }

    /// The upstream failed: the stale copy if it may stand in, else the failure.
    async fn failed(
        self: &Arc<Self>,
        ctx: &RequestContext,
        plan: &FillPlan,
        verdict: Verdict,
        failure: Failure,
    ) -> (Answer, FillOutcome) {
        tracing::warn!(url = %ctx.url(), error = %failure.message, "upstream request failed");
        let answer = match self.stale_fallback(plan) {
            Some(stale) => self.serve_stale_copy(ctx, stale, "stale-if-error", verdict.fwd_status).await,
            None => (respond::error(failure.status, &failure.message), verdict.with_detail(failure.detail)),
        };
        (answer, FillOutcome::Failed(failure))
    }

    /// What to do with an upstream response: a 5xx may be covered by the stale copy; a storable response is read
    /// (within its bounds), stored and served as a hit would be; anything else is passed through.
    async fn absorb(
        self: &Arc<Self>,
        ctx: &RequestContext,
        plan: &FillPlan,
        upstream: Response<UpstreamBody>,
        request_time: u64,
        started: tokio::time::Instant,
        mut verdict: Verdict,
    ) -> (Answer, FillOutcome) {
        let status = upstream.status();
        if status.is_server_error() {
            if let Some(stale) = self.stale_fallback(plan) {
                let failure = Failure { status, message: "upstream error".into(), detail: "upstream-error" };
                let answer = self.serve_stale_copy(ctx, stale, "stale-if-error", Some(status.as_u16())).await;
                return (answer, FillOutcome::Failed(failure));
            }
        }
        let response_time = self.clock.now_ms();
        let storage =
            self.rules.storage(&ctx.method, &ctx.headers, status, upstream.headers(), request_time, response_time);
        let store_plan = match storage {
            Ok(store_plan) => store_plan,
            Err(reason) => {
                self.drop_stale(plan).await;
                verdict.detail = verdict.detail.or(Some(reason.detail()));
                let outcome = if remembered(reason) { FillOutcome::Uncacheable } else { FillOutcome::NotStored };
                return ((respond::passed_through(upstream), verdict), outcome);
            }
        };
        let (parts, body) = upstream.into_parts();
        let deadline = started + self.settings.upstream_timeout;
        let collected =
            collect_up_to(body, self.settings.max_body, &self.fill_budget, deadline, self.settings.upstream_timeout)
                .await;
        let body = match collected {
            Ok(Collected::Whole(body, _budget)) => body,
            Ok(Collected::Streamed(body, reason)) => {
                Metrics::bump(&self.metrics.streamed_uncached);
                self.drop_stale(plan).await;
                let (detail, outcome) = match reason {
                    StreamReason::TooLarge => ("too-large", FillOutcome::Uncacheable),
                    StreamReason::Budget => ("fill-budget", FillOutcome::NotStored),
                };
                return ((respond::with_parts(parts, body), verdict.with_detail(detail)), outcome);
            }
            Err(CollectError::Deadline(_)) => {
                Metrics::bump(&self.metrics.upstream_errors);
                let failure = Failure {
                    status: StatusCode::GATEWAY_TIMEOUT,
                    message: "upstream did not finish the response in time".into(),
                    detail: "upstream-timeout",
                };
                return self.failed(ctx, plan, verdict, failure).await;
            }
            Err(CollectError::Broken(_)) => {
                Metrics::bump(&self.metrics.upstream_errors);
                let failure = Failure {
                    status: StatusCode::BAD_GATEWAY,
                    message: "upstream response broke off".into(),
                    detail: "upstream-broken",
                };
                return self.failed(ctx, plan, verdict, failure).await;
            }
        };
        if let Err(reason) = self.decodes_within_limit(&parts.headers, &body).await {
            tracing::info!(url = %ctx.url(), %reason, "not stored: its body does not decode within the limit");
            self.drop_stale(plan).await;
            let answer = (respond::with_parts(parts, ProxyBody::full(body)), verdict.with_detail("decoded-too-large"));
            return (answer, FillOutcome::Uncacheable);
        }
        let prepared = stored::prepare(parts.status, &parts.headers, body, &store_plan, response_time);
        let stored_key = self
            .storage
            .store(&ctx.key, |names| ctx.vary_view(names), &store_plan.vary, plan.marker.as_ref(), &prepared)
            .await;
        if stored_key.is_some() {
            Metrics::bump(&self.metrics.stored);
            self.hit_for_miss.forget(&ctx.key);
            verdict.stored = true;
        } else {
            verdict.detail = verdict.detail.or(Some("store-refused"));
        }
        let served = stored::served_form(stored_key.unwrap_or_else(|| ctx.key.clone()), prepared);
        let outcome = FillOutcome::Fetched(Arc::new(Fetched::new(ctx, &served, &store_plan.vary)));
        verdict.ttl = Some(ttl_seconds(&served, self.clock.now_ms()));
        (self.serve_stored(ctx, served, verdict).await, outcome)
    }

    /// A 304 for a stale response: its headers are merged in and it is stored afresh (RFC 9111 §4.3.4).
    async fn refreshed(
        self: &Arc<Self>,
        ctx: &RequestContext,
        stale: &Stored,
        upstream: Response<UpstreamBody>,
        request_time: u64,
        mut verdict: Verdict,
    ) -> (Answer, FillOutcome) {
        let response_time = self.clock.now_ms();
        // The stored Age described the old response; the 304 brings its own Date (or arrives now) and Age.
        let mut base = stale.headers.clone();
        base.remove(AGE);
        let mut merged = conditional::merge_304(&base, upstream.headers());
        if !upstream.headers().contains_key(DATE) {
            if let Ok(date) = HeaderValue::from_str(&freshness::format_http_date(response_time)) {
                merged.insert(DATE, date);
            }
        }
        let storage =
            self.rules.storage(&Method::GET, &ctx.headers, stale.status(), &merged, request_time, response_time);
        let mut refreshed = stale.clone();
        refreshed.headers = merged;
        let Ok(store_plan) = storage else {
            // The update says it may no longer be stored: serve it this once and drop the stored copy.
            self.drop_stale_key(&stale.key).await;
            return (
                self.serve_stored(ctx, refreshed, verdict.with_detail("no-longer-storable")).await,
                FillOutcome::NotStored,
            );
        };
        let prepared =
            stored::prepare(refreshed.status(), &refreshed.headers, refreshed.body.clone(), &store_plan, response_time);
        // prepare() moved a transformable Content-Encoding out of the headers; the body keeps its stored coding.
        let mut response = prepared.response;
        response.content_encoding = stale.content_encoding;
        let stored_again = self.storage.refresh(&stale.key, &response, &prepared.meta).await;
        let served = stored::served_form(stale.key.clone(), stored::ToStore { response, meta: prepared.meta });
        verdict.outcome = Outcome::Revalidated;
        verdict.stored = stored_again;
        verdict.ttl = Some(ttl_seconds(&served, self.clock.now_ms()));
        let outcome = FillOutcome::Fetched(Arc::new(Fetched::new(ctx, &served, &store_plan.vary)));
        (self.serve_stored(ctx, served, verdict).await, outcome)
    }

    /// Checks that a compressed body decodes within the limit, so that no later request can be made to decode
    /// more (a few hundred kilobytes of gzip can hold gigabytes of zeros).
    async fn decodes_within_limit(&self, headers: &http::HeaderMap, body: &bytes::Bytes) -> Result<(), String> {
        let mut codings = headers.get_all(CONTENT_ENCODING).iter();
        let (Some(value), None) = (codings.next(), codings.next()) else { return Ok(()) };
        if body.is_empty() {
            // No content to decode (a 204, a HEAD-like answer): nothing can grow from it.
            return Ok(());
        }
        let Some(coding) = value.to_str().ok().and_then(|v| v.trim().parse::<ContentEncoding>().ok()) else {
            return Ok(());
        };
        let max = self.settings.max_decoded;
        if body.len() < INLINE_DECODE_CHECK {
            return crate::encoding::decoded_len_within(body, coding, max).map(drop);
        }
        let body = body.clone();
        let _slot = self.transform_slots.acquire().await;
        tokio::task::spawn_blocking(move || crate::encoding::decoded_len_within(&body, coding, max).map(drop))
            .await
            .map_err(|e| e.to_string())?
    }

    /// Removes a stored response that a newer, unstorable one supersedes.
    async fn drop_stale(&self, plan: &FillPlan) {
        if let Some(stale) = &plan.stale {
            self.drop_stale_key(&stale.key).await;
        }
    }

    async fn drop_stale_key(&self, key: &str) {
        self.storage.remove(key).await;
    }
}

/// Whether a reason not to store is about the URL (remembered as hit-for-miss) rather than this request.
fn remembered(reason: NotStored) -> bool {
    !matches!(reason, NotStored::Method | NotStored::Authorization | NotStored::NoStoreRequest)
}
