//! The request path, one decision per file:
//!
//! ```text
//! GET/HEAD ─▶ lookup.rs ── fresh ──────────────▶ hit.rs      (a coding the client accepts; alternates)    HIT
//!                │      └─ stale ──────────────▶ stale.rs    (serve now and refresh, or refresh and wait)   STALE/HIT
//!                └─ missing ─ known uncacheable ▶ fill.rs pass (straight upstream, in parallel)             MISS
//!                           └─ otherwise ──────▶ fill.rs     (one upstream request per key; others wait)   MISS
//! other methods ─▶ bypass.rs (streamed both ways; invalidates what unsafe methods change)                 BYPASS
//! PURGE ────────▶ purge.rs  (every variant and coding of a URL)
//! ```
//!
//! Each decision takes the request's [`RequestContext`](crate::request::RequestContext) and returns the response
//! with its [`Verdict`](crate::cache_status::Verdict); the proxy reaches the store only through `larder-cache`.

pub mod bypass;
pub mod fill;
pub mod hit;
pub mod lookup;
pub mod purge;
pub mod stale;

use http::Response;

use crate::body::ProxyBody;
use crate::cache_status::Verdict;

/// What every decision returns.
pub type Answer = (Response<ProxyBody>, Verdict);
