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
        if removed > 0 {
            return (respond::json(StatusCode::OK, r#"{"purged":1}"#.to_owned()), verdict);
        }
        // Nothing under this key: say which key, since the likeliest reason is another Host for the same page.
        let answer = serde_json::json!({
            "purged": 0,
            "key": ctx.key,
            "note": "nothing is stored under this key. The Host is part of a page's key (a page fetched as \
                     http://localhost/… is not the one fetched as http://127.0.0.1/…): send PURGE with the Host \
                     clients use, or purge by url_prefix or tag through the admin API",
        });
        (respond::json(StatusCode::NOT_FOUND, answer.to_string()), verdict)
    }

    /// Removes a URL's stored responses (every variant and coding); returns how many store entries went.
    pub(crate) async fn remove_url(&self, base_key: &str) -> usize {
        let removed = self.storage.remove_url(base_key).await;
        self.metrics.purged.fetch_add(removed as u64, std::sync::atomic::Ordering::Relaxed);
        removed
    }
}
