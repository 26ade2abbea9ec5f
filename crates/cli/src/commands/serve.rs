//! `larder serve`: the caching reverse proxy in front of an app, on the embedded memory store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use larder_proxy::{ProxyConfig, Server};
use larder_store::{MemoryStore, SystemClock};

use crate::Failure;

/// Run the caching reverse proxy in front of an app.
///
/// Settings come from defaults, then --config FILE (TOML; every key is documented in docs/ARCHITECTURE.md), then
/// these flags or their environment variables. Responses are cached as the app's Cache-Control,
/// CDN-Cache-Control, Surrogate-Control and Expires headers say (RFC 9111); nothing without explicit freshness is
/// cached unless --heuristic-max is set. SIGTERM or Ctrl-C stops accepting and lets in-flight requests finish.
#[derive(Args)]
pub struct ServeArgs {
    /// The app to front, e.g. http://127.0.0.1:3000.
    #[arg(long, env = "LARDER_UPSTREAM", value_name = "URL")]
    upstream: Option<String>,
    /// Address clients connect to [default: 127.0.0.1:8080].
    #[arg(long, env = "LARDER_LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Address of the admin API (push, purge, metrics, health) [default: 127.0.0.1:8081].
    #[arg(long, env = "LARDER_ADMIN", value_name = "ADDR")]
    admin: Option<SocketAddr>,
    /// Do not start the admin API.
    #[arg(long, conflicts_with = "admin")]
    no_admin: bool,
    /// Bearer token for the admin API (required when it listens beyond loopback).
    #[arg(long, env = "LARDER_ADMIN_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// TOML settings file.
    #[arg(long, env = "LARDER_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Memory for cached responses, in bytes (suffixes K, M, G allowed) [default: 256M].
    #[arg(long, env = "LARDER_CAPACITY", value_name = "BYTES", value_parser = parse_bytes)]
    capacity: Option<usize>,
    /// Prefix for every cache key.
    #[arg(long, env = "LARDER_NAMESPACE")]
    namespace: Option<String>,
    /// Serve stale responses this many seconds past expiry while refreshing them (when the app does not say).
    #[arg(long, env = "LARDER_STALE_WHILE_REVALIDATE", value_name = "SECS")]
    stale_while_revalidate: Option<u64>,
    /// Serve stale responses this many seconds past expiry when the app fails (when the app does not say).
    #[arg(long, env = "LARDER_STALE_IF_ERROR", value_name = "SECS")]
    stale_if_error: Option<u64>,
    /// Cache responses that set cookies (off: one user's cookie must not reach others).
    #[arg(long, env = "LARDER_CACHE_SET_COOKIE")]
    cache_set_cookie: bool,
    /// Heuristic freshness for responses without explicit freshness, up to this many seconds (0 = off).
    #[arg(long, env = "LARDER_HEURISTIC_MAX", value_name = "SECS")]
    heuristic_max: Option<u64>,
    /// Compress compressible responses once when storing: off, gzip, br or zstd.
    #[arg(long, env = "LARDER_COMPRESS", value_name = "CODING")]
    compress: Option<String>,
    /// Largest cached response body in bytes; larger ones stream through (suffixes K, M, G).
    #[arg(long, env = "LARDER_MAX_BODY", value_name = "BYTES", value_parser = parse_bytes)]
    max_body: Option<usize>,
    /// Most concurrent client connections.
    #[arg(long, env = "LARDER_MAX_CONNECTIONS", value_name = "N")]
    max_connections: Option<usize>,
    /// Seconds to wait for the app's response head before answering 504.
    #[arg(long, env = "LARDER_UPSTREAM_TIMEOUT", value_name = "SECS")]
    upstream_timeout: Option<u64>,
    /// Serving threads, each with its own listening socket [default: one per core].
    #[arg(long, env = "LARDER_WORKERS", value_name = "N")]
    workers: Option<usize>,
}

/// `1048576`, `512K`, `256M`, `2G` (binary multiples).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => {
            let shift = match text[i..].trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
                "K" => 10,
                "M" => 20,
                "G" => 30,
                "" => 0,
                other => return Err(format!("unknown size suffix {other:?} (use K, M or G)")),
            };
            (&text[..i], shift)
        }
        None => (text, 0),
    };
    let n: usize = digits.parse().map_err(|_| format!("{text:?} is not a size"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{text:?} is too large"))
}

impl ServeArgs {
    /// Defaults, then the file, then flags and environment.
    pub fn config(&self) -> Result<ProxyConfig, Failure> {
        let mut config = match &self.config {
            Some(path) => ProxyConfig::from_file(path).map_err(|e| Failure::input(e.to_string()))?,
            None => ProxyConfig::default(),
        };
        if let Some(v) = &self.upstream {
            config.upstream = v.clone();
        } else if self.config.is_none() {
            return Err(Failure::input("--upstream is required (or set upstream in --config)"));
        }
        if let Some(v) = self.listen {
            config.listen = v;
        }
        if self.no_admin {
            config.admin = None;
        } else if let Some(v) = self.admin {
            config.admin = Some(v);
        }
        if let Some(v) = &self.admin_token {
            config.admin_token = Some(v.clone());
        }
        if let Some(v) = self.capacity {
            config.cache.capacity_bytes = v;
        }
        if let Some(v) = &self.namespace {
            config.namespace = v.clone();
        }
        if let Some(v) = self.stale_while_revalidate {
            config.cache.stale_while_revalidate_secs = v;
        }
        if let Some(v) = self.stale_if_error {
            config.cache.stale_if_error_secs = v;
        }
        if self.cache_set_cookie {
            config.cache.cache_set_cookie = true;
        }
        if let Some(v) = self.heuristic_max {
            config.cache.heuristic_max_secs = v;
        }
        if let Some(v) = &self.compress {
            config.cache.compress = v.clone();
        }
        if let Some(v) = self.max_body {
            config.cache.max_body_bytes = v;
        }
        if let Some(v) = self.max_connections {
            config.limits.max_connections = v;
        }
        if let Some(v) = self.upstream_timeout {
            config.limits.upstream_timeout_secs = v;
        }
        if let Some(v) = self.workers {
            config.workers = v;
        }
        config.validate().map_err(|e| Failure::input(e.to_string()))?;
        Ok(config)
    }
}

/// The memory store a configuration asks for.
pub fn memory_store(config: &ProxyConfig) -> Result<MemoryStore, Failure> {
    MemoryStore::builder()
        .capacity_bytes(config.cache.capacity_bytes)
        .max_entry_fraction(config.cache.max_entry_fraction)
        .build()
        .map_err(|e| Failure::input(format!("cache: {e}")))
}

pub fn run(args: ServeArgs) -> Result<(), Failure> {
    let config = args.config()?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let store = memory_store(&config)?;
    let server =
        Server::bind(config.clone(), store, Arc::new(SystemClock)).map_err(|e| Failure::input(e.to_string()))?;
    tracing::info!(
        listen = ?server.local_addr(),
        admin = ?server.admin_addr(),
        upstream = %config.upstream,
        capacity_bytes = config.cache.capacity_bytes,
        "larder is serving"
    );
    server.run_per_core(config.workers, shutdown_signal()).map_err(|e| Failure::input(e.to_string()))?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("512kb"), Ok(512 << 10));
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("M").is_err());
    }
}
