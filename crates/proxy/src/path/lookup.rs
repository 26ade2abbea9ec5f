//! The first decision for GET and HEAD: is there a stored response this request may reuse, and is it fresh?
//! Fresh goes to `hit.rs`, stale to `stale.rs`; nothing goes upstream through `fill.rs`, coalesced with other
//! requests for the same key unless the URL is known not to be storable or the request is one whose answer is not
//! shared (HEAD, credentials).

use std::sync::Arc;

use http::header::AUTHORIZATION;
use http::{HeaderMap, Method};
use larder_store::Store;

use super::fill::FillPlan;
use super::Answer;
use crate::cache_status::{Fwd, Outcome, Verdict};
use crate::handler::Proxy;
use crate::request::RequestContext;
use crate::rfc9111::Rules;
use crate::stored::{Lookup, Stored};

impl<S: Store> Proxy<S> {
    /// GET and HEAD.
    pub(crate) async fn serve_cacheable(self: &Arc<Self>, ctx: &RequestContext) -> Answer {
        let now = self.clock.now_ms();
        match self.storage.lookup(&ctx.key, |names| ctx.vary_view(names)).await {
            Lookup::Found(found, marker) => {
                if !reusable_for(&self.rules, &found, &ctx.headers) {
                    // `fwd=request` says the credentials sent it upstream; the detail will say what became of it.
                    return self.fill_alone(ctx, FillPlan::credentialed(ctx, marker)).await;
                }
                let age_ms = found.age_seconds(now).saturating_mul(1000);
                if found.is_fresh(now) && !self.rules.request_requires_validation(&ctx.headers, age_ms) {
                    let verdict = Verdict::new(Outcome::Hit).with_ttl(ttl_seconds(&found, now));
                    return self.serve_stored(ctx, *found, verdict).await;
                }
                self.serve_stale(ctx, *found, marker).await
            }
            Lookup::Missing { fill_key, marker } => {
                let fwd = if marker.is_some() { Fwd::VaryMiss } else { Fwd::UriMiss };
                if ctx.method == Method::HEAD {
                    // HEAD responses are not stored; it goes upstream as HEAD.
                    return self.fill_alone(ctx, FillPlan::pass(ctx, fwd, "head", marker)).await;
                }
                if ctx.headers.contains_key(AUTHORIZATION) {
                    // A response to credentials is not shared with waiters (RFC 9111 §3.5).
                    return self.fill_alone(ctx, FillPlan::credentialed(ctx, marker)).await;
                }
                if self.hit_for_miss.contains(&ctx.key, now) {
                    return self.fill_alone(ctx, FillPlan::pass(ctx, Fwd::Bypass, "uncacheable", marker)).await;
                }
                let plan = FillPlan {
                    fill_key,
                    marker,
                    stale: None,
                    fwd,
                    outcome: Outcome::Miss,
                    detail: None,
                    background: false,
                };
                self.fill_coalesced(ctx, plan).await
            }
        }
    }
}

/// RFC 9111 §3.5: a response stored for a request with Authorization is reused only if it said so, in the field
/// that governs this cache (a targeted field, Surrogate-Control or Cache-Control: the one it was stored by).
fn reusable_for(rules: &Rules, stored: &Stored, request: &HeaderMap) -> bool {
    if !request.contains_key(AUTHORIZATION) {
        return true;
    }
    let d = rules.governing(&stored.headers).directives;
    d.public || d.must_revalidate || d.s_maxage.is_some()
}

/// Seconds of freshness left (negative when stale), for `Cache-Status: ttl`: rounded up, so that it agrees with
/// the `Age` served (rounded down) for the whole seconds of a lifetime.
pub(crate) fn ttl_seconds(stored: &Stored, now_ms: u64) -> i64 {
    if stored.meta.expires_at == 0 {
        return i64::MAX / 1000;
    }
    (stored.meta.expires_at as i64 - now_ms as i64 + 999).div_euclid(1000)
}
