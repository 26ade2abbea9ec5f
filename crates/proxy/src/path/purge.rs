//! Purging a URL: `PURGE <url>` on the main listener (only from `--purge-from` clients), `POST /purge {"url": …}` on the
//! admin API, and invalidation by unsafe methods all come here. A URL's base key holds its response or, when
//! responses vary, a marker; removing it (and the response's alternates in other codings) makes every variant
//! unreachable at once, since variant keys are made with the marker's generation (spec/FORMAT.md §5.4).

use std::sync::Arc;

use http::StatusCode;
use larder_store::Store;

use super::Answer;
use crate::cache_status::{Outcome, Verdict};
use crate::handler::Proxy;
use crate::request::RequestContext;
use crate::respond;
use crate::stored;

impl<S: Store> Proxy<S> {
    /// `PURGE` on the main listener.
    pub(crate) async fn purge_request(self: &Arc<Self>, ctx: &RequestContext) -> Answer {
        let verdict = Verdict::new(Outcome::Local).with_detail("purge");
        if !self.settings.purge_from.contains(ctx.client.ip()) {
            let message = if self.settings.purge_from.is_empty() {
                "PURGE is off: larder serve --purge-from ADDRESSES names the clients that may send it (or purge \
                 through the admin API)"
            } else {
                "PURGE is not allowed from this address (see --purge-from)"
            };
            let response = respond::error(StatusCode::FORBIDDEN, message);
            return (response, verdict);
        }
        let removed = self.remove_url(&ctx.key).await;
        let status = if removed > 0 { StatusCode::OK } else { StatusCode::NOT_FOUND };
        (respond::json(status, format!("{{\"purged\":{}}}", usize::from(removed > 0))), verdict)
    }

    /// Removes a URL's stored responses (every variant and coding); returns how many store entries went.
    pub(crate) async fn remove_url(&self, base_key: &str) -> usize {
        let keys = stored::url_keys(base_key);
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let removed = self.cache.remove_entries(&keys).await;
        self.metrics.purged.fetch_add(removed as u64, std::sync::atomic::Ordering::Relaxed);
        removed
    }
}
