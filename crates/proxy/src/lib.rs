//! larder's caching reverse proxy: it serves stored responses (status, headers, body) without touching the app,
//! and proxies everything else. HTTP caching semantics live in [`rfc9111`]; storage goes through
//! `larder_cache` to any `larder_store::Store` (the embedded memory store by default).

pub mod admin;
pub mod body;
pub mod config;
pub mod encoding;
pub mod handler;
pub mod metrics;
pub mod origin;
pub mod respond;
pub mod rfc9111;
pub mod server;
pub mod stored;
pub mod upstream;

pub use config::ProxyConfig;
pub use handler::Proxy;
pub use server::{ServeError, Server};
