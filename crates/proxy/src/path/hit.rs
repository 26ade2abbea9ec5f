//! Serving a stored response in a coding the client accepts. A response is stored once, as the upstream sent it;
//! a client that does not accept its coding gets it decoded, and a client that accepts the offered coding (gzip by
//! default) gets an identity body compressed. Either transformation is made once, on the first request that needs
//! it, kept in the store beside the original (an *alternate*, same expiry and tags) and served from there after:
//! who asks first never decides what everyone else gets, and nobody gets a coding they did not ask for.
//!
//! Transformations run on the blocking pool, a few at a time, each bounded by the decoded-size limit, so one huge
//! or hostile body can neither stall the event loop nor take unbounded memory.

use std::sync::Arc;

use http::header::CONTENT_ENCODING;
use larder_cache::coalesce::Role;
use larder_format::ContentEncoding;

use larder_store::Store;

use super::Answer;
use crate::cache_status::Verdict;
use crate::encoding::{self, Accepted};
use crate::handler::Proxy;
use crate::metrics::Metrics;
use crate::request::RequestContext;
use crate::respond::{self, stored_coding, Representation};
use crate::stored::{self, Stored};

/// Which body to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// The stored one.
    Stored { varies_on_coding: bool },
    /// The stored one in this coding.
    Alternate(ContentEncoding),
}

/// Why an alternate cannot be served.
enum AlternateError {
    /// Compressing would not make the body smaller: serve the original.
    NotWorth,
    /// The stored body does not decode within the limit.
    Undecodable(String),
}

impl<S: Store> Proxy<S> {
    /// Serves `stored` to the request, in a coding it accepts.
    pub(crate) async fn serve_stored(
        self: &Arc<Self>,
        ctx: &RequestContext,
        stored: Stored,
        verdict: Verdict,
    ) -> Answer {
        let now = self.clock.now_ms();
        let accepted = Accepted::from_request(&ctx.headers);
        let serve = |stored: Stored, representation| {
            respond::from_stored(stored, &ctx.method, &ctx.headers, now, representation)
        };
        match choose(&stored, &accepted, self.settings.offered_coding) {
            Choice::Stored { varies_on_coding } => {
                (serve(stored, Representation { transformed: false, varies_on_coding }), verdict)
            }
            Choice::Alternate(coding) => match self.alternate(&stored, coding).await {
                Ok(alternate) => {
                    (serve(alternate, Representation { transformed: true, varies_on_coding: true }), verdict)
                }
                Err(AlternateError::NotWorth) => {
                    (serve(stored, Representation { transformed: false, varies_on_coding: true }), verdict)
                }
                Err(AlternateError::Undecodable(reason)) => {
                    tracing::warn!(key = %stored.key, %reason, "a stored response cannot be decoded");
                    let response =
                        respond::error(http::StatusCode::BAD_GATEWAY, "stored response could not be decoded");
                    (response, verdict.with_detail("undecodable"))
                }
            },
        }
    }

    /// The stored response in `coding`: from the store if it was made before for this very response, else made
    /// now (once per key, however many requests ask at the same moment) and stored.
    async fn alternate(self: &Arc<Self>, stored: &Stored, coding: ContentEncoding) -> Result<Stored, AlternateError> {
        let key = stored::alternate_key(&stored.key, coding);
        for _ in 0..3 {
            if let Some(found) = self.stored_alternate(&key, stored, coding).await {
                return Ok(found);
            }
            match self.transforms.join_or_lead(&key) {
                Role::Lead(lead) => {
                    let made = self.make_alternate(stored, coding, &key).await;
                    lead.finish(made.is_ok());
                    return made;
                }
                Role::Wait(waiter) => {
                    if waiter.wait().await != Some(true) {
                        // The leader found nothing worth storing, or failed: do the work here.
                        break;
                    }
                }
            }
        }
        self.make_alternate(stored, coding, &key).await
    }

    /// An alternate in the store, if it was made from this version of the response (a refreshed response gets new
    /// alternates: its `created_at` differs).
    async fn stored_alternate(&self, key: &str, stored: &Stored, coding: ContentEncoding) -> Option<Stored> {
        self.storage.alternate(key, stored, coding).await
    }

    async fn make_alternate(
        &self,
        stored: &Stored,
        coding: ContentEncoding,
        key: &str,
    ) -> Result<Stored, AlternateError> {
        let Some(from) = stored_coding(stored) else { return Err(AlternateError::NotWorth) };
        let _slot = self.transform_slots.acquire().await;
        let (body, headers, max) = (stored.body.clone(), stored.headers.clone(), self.settings.max_decoded);
        let transformed = tokio::task::spawn_blocking(move || match coding {
            ContentEncoding::Identity => encoding::decode(&body, from, max).map(Some),
            to => Ok(encoding::compress_for_store(&body, &headers, to)),
        })
        .await
        .map_err(|e| AlternateError::Undecodable(e.to_string()))?;
        let body = match transformed {
            Ok(Some(body)) => body,
            Ok(None) => return Err(AlternateError::NotWorth),
            Err(reason) => return Err(AlternateError::Undecodable(reason)),
        };
        let mut alternate = stored.clone();
        alternate.key = key.to_owned();
        alternate.headers.remove(CONTENT_ENCODING);
        alternate.body = body;
        alternate.content_encoding = coding;
        if self.storage.store_alternate(key, &alternate.to_response(), &alternate.meta).await {
            Metrics::bump(&self.metrics.transformed);
        }
        Ok(alternate)
    }
}

/// Which body a client gets: the stored one if it accepts its coding (unless the stored body is identity, worth
/// compressing, and the client accepts the offered coding), else the stored one decoded; never transformed when
/// the response says `no-transform`.
fn choose(stored: &Stored, accepted: &Accepted, offered: Option<ContentEncoding>) -> Choice {
    let Some(coding) = stored_coding(stored) else {
        // A coding larder does not know: it goes to everyone as it is, as the upstream would have sent it.
        return Choice::Stored { varies_on_coding: false };
    };
    // RFC 9110 §7.7: a proxy must not transform the content of a response that says no-transform.
    if stored.no_transform {
        return Choice::Stored { varies_on_coding: false };
    }
    let offer = offered
        .filter(|_| coding == ContentEncoding::Identity && encoding::worth_compressing(&stored.body, &stored.headers));
    match offer {
        Some(offer) if accepted.accepts(offer) => Choice::Alternate(offer),
        _ if accepted.accepts(coding) || coding == ContentEncoding::Identity => {
            Choice::Stored { varies_on_coding: coding != ContentEncoding::Identity || offer.is_some() }
        }
        _ => Choice::Alternate(ContentEncoding::Identity),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::HeaderValue;
    use larder_format::{EntryMeta, HttpResponse};

    fn stored(coding: ContentEncoding, content_type: &'static str, body_len: usize) -> Stored {
        stored_with(coding, content_type, body_len, None)
    }

    fn stored_with(
        coding: ContentEncoding,
        content_type: &'static str,
        body_len: usize,
        cache_control: Option<&'static str>,
    ) -> Stored {
        let mut headers = vec![(Bytes::from_static(b"content-type"), Bytes::from_static(content_type.as_bytes()))];
        if let Some(value) = cache_control {
            headers.push((Bytes::from_static(b"cache-control"), Bytes::from_static(value.as_bytes())));
        }
        let response =
            HttpResponse { status: 200, headers, body: Bytes::from(vec![b'a'; body_len]), content_encoding: coding };
        Stored::from_parts("k".into(), EntryMeta::with_ttl(1, 60_000), response)
    }

    fn accepting(value: &'static str) -> Accepted {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::ACCEPT_ENCODING, HeaderValue::from_static(value));
        Accepted::from_request(&h)
    }

    #[test]
    fn a_response_that_says_no_transform_is_served_as_stored() {
        let gzipped = stored_with(ContentEncoding::Gzip, "text/html", 4096, Some("max-age=60, no-transform"));
        let choice = choose(&gzipped, &accepting("identity"), Some(ContentEncoding::Gzip));
        assert_eq!(choice, Choice::Stored { varies_on_coding: false }, "not decoded for a client without gzip");
        let plain = stored_with(ContentEncoding::Identity, "text/html", 4096, Some("no-transform"));
        assert_eq!(
            choose(&plain, &accepting("gzip"), Some(ContentEncoding::Gzip)),
            Choice::Stored { varies_on_coding: false }
        );
    }

    #[test]
    fn every_client_gets_a_coding_it_accepts() {
        let gzip = Some(ContentEncoding::Gzip);
        let html = stored(ContentEncoding::Identity, "text/html", 4096);
        assert_eq!(choose(&html, &accepting("gzip, br"), gzip), Choice::Alternate(ContentEncoding::Gzip));
        assert_eq!(
            choose(&html, &Accepted::from_request(&http::HeaderMap::new()), gzip),
            Choice::Stored { varies_on_coding: true }
        );
        assert_eq!(choose(&html, &accepting("gzip"), None), Choice::Stored { varies_on_coding: false });
        let small = stored(ContentEncoding::Identity, "text/html", 100);
        assert_eq!(choose(&small, &accepting("gzip"), gzip), Choice::Stored { varies_on_coding: false });
        let png = stored(ContentEncoding::Identity, "image/png", 4096);
        assert_eq!(choose(&png, &accepting("gzip"), gzip), Choice::Stored { varies_on_coding: false });
        let brotli = stored(ContentEncoding::Br, "text/html", 4096);
        assert_eq!(choose(&brotli, &accepting("br"), gzip), Choice::Stored { varies_on_coding: true });
        assert_eq!(choose(&brotli, &accepting("gzip"), gzip), Choice::Alternate(ContentEncoding::Identity));
    }
}
