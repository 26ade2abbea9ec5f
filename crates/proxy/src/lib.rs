//! larder's caching reverse proxy: it serves stored responses (status, headers, body) without touching the app,
//! and proxies everything else. A request is checked and normalised in `request.rs`, handled by the decisions in
//! `path/`, and answered with a [`cache_status::Verdict`]; HTTP caching semantics live in [`rfc9111`]; stored
//! responses go through [`storage::ResponseStore`], the only code that calls `larder_cache`, to any
//! `larder_store::Store` (the embedded memory store by default). Only what other crates use is public: the server,
//! its configuration, the caching rules, the storage seam, the verdicts and the demo's app. docs/security.md lists
//! the threats each part answers.

mod access_log;
mod admin;
mod body;
pub mod cache_status;
pub mod config;
mod connection;
mod encoding;
mod forwarding;
mod handler;
mod health;
mod hit_for_miss;
mod marker_hints;
mod metrics;
pub mod origin;
mod path;
mod per_client;
mod prepared;
mod request;
mod respond;
pub mod rfc9111;
mod server;
pub mod storage;
mod stored;
mod upstream;

pub use config::{ConfigError, ProxyConfig};
pub use handler::Proxy;
pub use server::{ServeError, Server};
