//! A stored response past its freshness. Within stale-while-revalidate it is served at once while one background
//! request refreshes it. Otherwise it must be refreshed first, and that refresh is coalesced like a cold miss: one
//! request goes upstream per stored response (conditional when it has validators), however many clients ask. If the
//! upstream fails, or is slower than `stale_wait`, the stale response answers them instead, within stale-if-error
//! (Varnish's grace, nginx's `proxy_cache_use_stale updating`): a hanging app is asked once, not once per client.

use std::sync::Arc;

use larder_store::Store;

use super::fill::FillPlan;
use super::lookup::ttl_seconds;
use super::Answer;
use crate::cache_status::{Fwd, Outcome, Verdict};
use crate::handler::Proxy;
use crate::request::RequestContext;
use crate::stored::{FoundMarker, Stored};

impl<S: Store> Proxy<S> {
    pub(crate) async fn serve_stale(
        self: &Arc<Self>,
        ctx: &RequestContext,
        stored: Stored,
        marker: Option<FoundMarker>,
    ) -> Answer {
        let now = self.clock.now_ms();
        let allowance = self.rules.stale_allowance_of(&stored.headers);
        let within_swr = stored.staleness_ms(now) < allowance.while_revalidate.as_millis() as u64
            && !self.rules.request_requires_validation(&ctx.headers, u64::MAX);
        if !within_swr {
            return self.fill_coalesced(ctx, FillPlan::refresh(stored, marker)).await;
        }
        if let Some(lead) = self.fills.try_lead(&stored.key) {
            // Nobody waits for this answer: the refresh stores what it gets.
            drop(self.spawn_fill(ctx.clone(), FillPlan::refresh_in_background(stored.clone(), marker), Some(lead)));
        }
        let verdict =
            Verdict::new(Outcome::Stale).with_ttl(ttl_seconds(&stored, now)).with_detail("stale-while-revalidate");
        self.serve_stored(ctx, stored, verdict).await
    }

    /// Whether `stored` may stand in for a failed or slow upstream now.
    pub(crate) fn within_stale_if_error(&self, stored: &Stored) -> bool {
        let allowance = self.rules.stale_allowance_of(&stored.headers);
        stored.staleness_ms(self.clock.now_ms()) < allowance.if_error.as_millis() as u64
    }

    /// Answers with a stale copy in place of the upstream's answer; `why` says what happened upstream.
    pub(crate) async fn serve_stale_copy(
        self: &Arc<Self>,
        ctx: &RequestContext,
        stale: &Stored,
        why: &'static str,
        fwd_status: Option<u16>,
    ) -> Answer {
        let now = self.clock.now_ms();
        let mut verdict =
            Verdict::forwarded(Outcome::Stale, Fwd::Stale).with_ttl(ttl_seconds(stale, now)).with_detail(why);
        verdict.fwd_status = fwd_status;
        self.serve_stored(ctx, stale.clone(), verdict).await
    }
}
