//! Methods larder does not cache (POST, PUT, DELETE…): streamed to the upstream and back, the request body within
//! its size limit and deadline. After a successful unsafe request, what it may have changed is invalidated: the
//! target URL and same-host `Location` / `Content-Location` URLs, every variant and coding of each (RFC 9111 §4.4).

use std::sync::Arc;

use http::StatusCode;
use hyper::body::Incoming;
use larder_store::Store;

use super::Answer;
use crate::body::RequestBody;
use crate::cache_status::{Fwd, Outcome, Verdict};
use crate::handler::Proxy;
use crate::request::RequestContext;
use crate::respond;
use crate::rfc9111::invalidation;
use crate::upstream::UpstreamError;

impl<S: Store> Proxy<S> {
    pub(crate) async fn forward(self: &Arc<Self>, ctx: &RequestContext, body: Incoming) -> Answer {
        let mut verdict = Verdict::forwarded(Outcome::Bypass, Fwd::Method);
        let limit = self.settings.max_request_body;
        if http_body::Body::size_hint(&body).lower() > limit {
            let message = format!("request body exceeds the {limit}-byte limit");
            return (respond::error(StatusCode::PAYLOAD_TOO_LARGE, &message), verdict.with_detail("body-too-large"));
        }
        let body = RequestBody::from_client(body, limit, self.settings.request_body_timeout);
        let result = match self.upstream.request_for(ctx, ctx.method.clone(), &[], &[], body) {
            Ok(request) => self.upstream.send(request, self.upstream_slot(ctx).await).await,
            Err(error) => Err(error),
        };
        self.record_upstream(&result);
        let (upstream, elapsed) = match result {
            Ok(answered) => answered,
            Err(error) => {
                let (status, message, detail) = match &error {
                    UpstreamError::BodyTooLarge(_) => {
                        (StatusCode::PAYLOAD_TOO_LARGE, error.to_string(), "body-too-large")
                    }
                    UpstreamError::ClientBody(_) => (StatusCode::BAD_REQUEST, error.to_string(), "bad-request-body"),
                    UpstreamError::Timeout(_) => {
                        (StatusCode::GATEWAY_TIMEOUT, "upstream timed out".to_owned(), "upstream-timeout")
                    }
                    UpstreamError::Unreachable(_) => {
                        tracing::warn!(url = %ctx.url(), %error, "upstream request failed");
                        (StatusCode::BAD_GATEWAY, "upstream unreachable".to_owned(), "upstream-unreachable")
                    }
                };
                return (respond::error(status, &message), verdict.with_detail(detail));
            }
        };
        verdict.fwd_status = Some(upstream.status().as_u16());
        verdict.upstream_time = Some(elapsed);
        let targets =
            invalidation::targets(&ctx.method, upstream.status(), &ctx.authority, &ctx.target, upstream.headers());
        for target in targets {
            self.remove_url(&self.url_key(ctx.scheme, &ctx.authority, &target)).await;
        }
        (respond::passed_through(upstream), verdict)
    }
}
