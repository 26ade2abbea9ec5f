//! larder's caching reverse proxy: it serves stored responses (status, headers, body) without touching the app,
//! and proxies everything else. A request is checked and normalised in [`request`], handled by the decisions in
//! [`path`], and answered with a [`cache_status::Verdict`]; HTTP caching semantics live in [`rfc9111`]; storage goes
//! through `larder_cache` to any `larder_store::Store` (the embedded memory store by default). docs/security.md
//! lists the threats each part answers.

pub mod access_log;
pub mod admin;
pub mod body;
pub mod cache_status;
pub mod config;
pub mod connection;
pub mod encoding;
pub mod forwarding;
pub mod handler;
pub mod health;
pub mod hit_for_miss;
pub mod marker_hints;
pub mod metrics;
pub mod origin;
pub mod path;
pub mod prepared;
pub mod request;
pub mod respond;
pub mod rfc9111;
pub mod server;
pub mod stored;
pub mod upstream;

pub use config::{ConfigError, ProxyConfig};
pub use handler::Proxy;
pub use server::{ServeError, Server};
