//! `larder serve`: the caching reverse proxy in front of an app, on the embedded memory store.
//!
//! Every setting of the TOML file (docs/ARCHITECTURE.md#configuration) has a flag and an environment variable
//! here, listed once in [`SETTINGS`] (a test checks the list against the configuration and the flags). Sizes take
//! the same units as the file (`512M`, `1.5G`); addresses may be host names; booleans take true/false, yes/no,
//! on/off or 1/0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use larder_proxy::config::duration::{parse_ms, parse_secs};
use larder_proxy::config::resolve_addr;
use larder_proxy::config::size::{parse_size, parse_usize};
use larder_proxy::{ProxyConfig, Server};
use larder_store::{MemoryStore, Store, SystemClock};

use crate::Failure;

/// Run the caching reverse proxy in front of an app.
///
/// Settings come from defaults, then --config FILE (TOML; every key is documented in docs/ARCHITECTURE.md), then
/// these flags or their environment variables. Responses are cached as the app's Cache-Control,
/// CDN-Cache-Control, Surrogate-Control and Expires headers say (RFC 9111); nothing without explicit freshness is
/// cached unless --heuristic-max is set. SIGTERM, SIGHUP or Ctrl-C stops accepting and lets in-flight requests
/// finish. Sizes accept K, M, G, T and decimals (1.5G); durations accept ms, s, m, h (5m), a bare number being the
/// setting's own unit (seconds, or milliseconds where it says so); booleans accept true/false, yes/no, on/off, 1/0.
/// The admin API needs a token: --admin-token-file FILE (or LARDER_ADMIN_TOKEN), or --admin-no-token on loopback.
/// Never pass the token itself as an argument: --admin-token shows in /proc/PID/cmdline and `ps` to every local
/// user. docs/security.md lists what larder does with hostile requests.
#[derive(Args)]
pub struct ServeArgs {
    /// TOML settings file.
    #[arg(long, env = "LARDER_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The app to front, e.g. http://127.0.0.1:3000 (a path is put before every request path).
    #[arg(long, env = "LARDER_UPSTREAM", value_name = "URL")]
    upstream: Option<String>,
    /// Address clients connect to, e.g. 0.0.0.0:8080 or localhost:8080 [default: 127.0.0.1:8080].
    #[arg(long, env = "LARDER_LISTEN", value_name = "ADDR", value_parser = resolve_addr)]
    listen: Option<SocketAddr>,
    /// Address of the admin API (push, purge, metrics, health) [default: 127.0.0.1:8081].
    #[arg(long, env = "LARDER_ADMIN", value_name = "ADDR", value_parser = resolve_addr)]
    admin: Option<SocketAddr>,
    /// Do not start the admin API.
    #[arg(long, conflicts_with = "admin")]
    no_admin: bool,
    /// Bearer token the admin API requires (it does not start without one, unless --admin-no-token). As a flag it
    /// shows in /proc/PID/cmdline and `ps` to every local user: give LARDER_ADMIN_TOKEN or --admin-token-file
    /// instead.
    #[arg(
        long,
        env = "LARDER_ADMIN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true,
        conflicts_with = "admin_token_file"
    )]
    admin_token: Option<String>,
    /// A file holding the admin API's bearer token (at most one trailing newline), read once at start: the way to
    /// give the token without it showing in the process list. Refused when empty or writable by every user; make it
    /// readable by larder alone (chmod 600).
    #[arg(long, env = "LARDER_ADMIN_TOKEN_FILE", value_name = "FILE")]
    admin_token_file: Option<String>,
    /// Run a loopback admin API without a token: every local process may push and purge (browsers still cannot:
    /// see docs/security.md). Refused when --admin is not a loopback address [default: false].
    #[arg(long, env = "LARDER_ADMIN_NO_TOKEN", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    admin_no_token: Option<bool>,
    /// Prefix for every cache key.
    #[arg(long, env = "LARDER_NAMESPACE")]
    namespace: Option<String>,
    /// Query parameters left out of keys and of the URL sent upstream; comma-separated, a trailing * makes a prefix
    /// [default: utm_*,gclid,fbclid,msclkid].
    #[arg(long, env = "LARDER_DROP_QUERY_PARAMS", value_name = "NAMES", value_delimiter = ',')]
    drop_query_params: Option<Vec<String>>,
    /// The response header that says HIT, MISS, STALE or BYPASS [default: x-cache].
    #[arg(long, env = "LARDER_CACHE_STATUS_HEADER", value_name = "NAME")]
    cache_status_header: Option<String>,
    /// Send the RFC 9211 Cache-Status response header [default: true].
    #[arg(long, env = "LARDER_CACHE_STATUS", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    cache_status: Option<bool>,
    /// Clients that may send PURGE on the main listener: addresses or networks, comma-separated (127.0.0.1,
    /// 10.0.0.0/8) [default: none; purge through the admin API]. A proxy in front of larder (a TLS terminator on
    /// this host, say) makes every client it forwards arrive from its address: do not name it.
    #[arg(long, env = "LARDER_PURGE_FROM", value_name = "NETS", value_delimiter = ',')]
    purge_from: Option<Vec<String>>,
    /// Proxies in front of larder whose X-Forwarded-* and Forwarded fields are believed: addresses or networks,
    /// comma-separated (10.0.0.0/8,192.0.2.7) [default: none].
    #[arg(long, env = "LARDER_TRUSTED_PROXIES", value_name = "NETS", value_delimiter = ',')]
    trusted_proxies: Option<Vec<String>>,
    /// Write one line per request to FILE, or to standard output with "-" [default: off].
    #[arg(long, env = "LARDER_ACCESS_LOG", value_name = "FILE|-")]
    access_log: Option<String>,
    /// Serving threads, each with its own listening socket [default: 0, one per core].
    #[arg(long, env = "LARDER_WORKERS", value_name = "N")]
    workers: Option<usize>,

    /// Cache in this shared store instead of private memory (spec/STORES.md URL): memcached://h1:11211,h2:11211,
    /// redis://host:6379/0, redis+cluster://h1:7000,h2:7001, postgres://user@host/db, sqlite:///path.db,
    /// file:///dir [default: none, memory only].
    #[arg(long, env = "LARDER_STORE", value_name = "URL")]
    store: Option<String>,
    /// With --store: a memory copy of this size in front of the shared store [default: 0, none].
    #[arg(long, env = "LARDER_L1", value_name = "BYTES", value_parser = parse_usize)]
    l1: Option<usize>,
    /// With --l1: milliseconds an L1 copy is used before the shared store is asked again; bounds how long another
    /// proxy's purge takes to reach this one [default: 1000].
    #[arg(long, env = "LARDER_L1_TTL", value_name = "DURATION", value_parser = parse_ms)]
    l1_ttl: Option<u64>,
    /// With --store and no --l1: memory for the responses fetched while the shared store fails, so the app sees
    /// about one request per URL per freshness lifetime during an outage; dropped (never written back) when the
    /// store answers again. With --l1, the L1 is used instead. 0 turns it off [default: 64M].
    #[arg(long, env = "LARDER_OUTAGE_MEMORY", value_name = "BYTES", value_parser = parse_usize)]
    outage_memory: Option<usize>,
    /// Memory for cached responses [default: 256M].
    #[arg(long, env = "LARDER_CAPACITY", value_name = "BYTES", value_parser = parse_usize)]
    capacity: Option<usize>,
    /// Largest entry, as a fraction of capacity [default: 0.0625].
    #[arg(long, env = "LARDER_MAX_ENTRY_FRACTION", value_name = "FRACTION")]
    max_entry_fraction: Option<f64>,
    /// Largest cached response body, and the most a stored body may decode to; larger ones stream through
    /// [default: 8M].
    #[arg(long, env = "LARDER_MAX_BODY", value_name = "BYTES", value_parser = parse_usize)]
    max_body: Option<usize>,
    /// Bytes all fills under way may buffer together; past it responses stream through uncached [default: 0, a
    /// quarter of --capacity, at least --max-body].
    #[arg(long, env = "LARDER_FILL_BUFFER", value_name = "BYTES", value_parser = parse_usize)]
    fill_buffer: Option<usize>,
    /// Heuristic freshness for responses without explicit freshness, up to this many seconds [default: 0, off].
    #[arg(long, env = "LARDER_HEURISTIC_MAX", value_name = "DURATION", value_parser = parse_secs)]
    heuristic_max: Option<u64>,
    /// Cache responses that set cookies [default: false: one user's cookie must not reach others].
    #[arg(long, env = "LARDER_CACHE_SET_COOKIE", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    cache_set_cookie: Option<bool>,
    /// Serve stale responses this many seconds past expiry while refreshing them, when the app does not say
    /// [default: 0].
    #[arg(long, env = "LARDER_STALE_WHILE_REVALIDATE", value_name = "DURATION", value_parser = parse_secs)]
    stale_while_revalidate: Option<u64>,
    /// Serve stale responses this many seconds past expiry when the app fails, when the app does not say
    /// [default: 300].
    #[arg(long, env = "LARDER_STALE_IF_ERROR", value_name = "DURATION", value_parser = parse_secs)]
    stale_if_error: Option<u64>,
    /// Milliseconds a request waits for a refresh under way before the stale response answers it [default: 1000].
    #[arg(long, env = "LARDER_STALE_WAIT", value_name = "DURATION", value_parser = parse_ms)]
    stale_wait: Option<u64>,
    /// Seconds stale responses with validators are kept to be revalidated [default: 3600].
    #[arg(long, env = "LARDER_REVALIDATION_WINDOW", value_name = "DURATION", value_parser = parse_secs)]
    revalidation_window: Option<u64>,
    /// Seconds to remember that a URL's response could not be stored, sending its requests upstream in parallel
    /// [default: 60; 0 = off].
    #[arg(long, env = "LARDER_HIT_FOR_MISS", value_name = "DURATION", value_parser = parse_secs)]
    hit_for_miss: Option<u64>,
    /// Honour clients' Cache-Control and Pragma request directives [default: false: clients cannot force the app
    /// to work].
    #[arg(long, env = "LARDER_HONOR_REQUEST_CACHE_CONTROL", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    honor_request_cache_control: Option<bool>,
    /// Fields that address this cache specifically (RFC 9213), comma-separated, first match wins
    /// [default: CDN-Cache-Control].
    #[arg(long, env = "LARDER_TARGETED_FIELDS", value_name = "NAMES", value_delimiter = ',')]
    targeted_fields: Option<Vec<String>>,
    /// Honour Surrogate-Control (and remove it from responses) [default: true].
    #[arg(long, env = "LARDER_SURROGATE_CONTROL", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool)]
    surrogate_control: Option<bool>,
    /// The coding offered to clients that accept it when a stored body has none; compressed once and kept
    /// [default: gzip].
    #[arg(long, env = "LARDER_COMPRESS", value_name = "CODING", value_parser = ["off", "gzip", "br", "zstd"])]
    compress: Option<String>,

    /// Largest request head; larger ones get 431 [default: 16K].
    #[arg(long, env = "LARDER_MAX_HEADER", value_name = "BYTES", value_parser = parse_usize)]
    max_header: Option<usize>,
    /// Largest request body; larger ones get 413 [default: 16M].
    #[arg(long, env = "LARDER_MAX_REQUEST_BODY", value_name = "BYTES", value_parser = parse_size)]
    max_request_body: Option<u64>,
    /// Most concurrent client connections [default: 10000].
    #[arg(long, env = "LARDER_MAX_CONNECTIONS", value_name = "N")]
    max_connections: Option<usize>,
    /// Upstream requests one client connection may have under way [default: 32].
    #[arg(long, env = "LARDER_MAX_UPSTREAM_PER_CONNECTION", value_name = "N")]
    max_upstream_per_connection: Option<usize>,
    /// Concurrent HTTP/2 streams per connection [default: 100].
    #[arg(long, env = "LARDER_MAX_CONCURRENT_STREAMS", value_name = "N")]
    max_concurrent_streams: Option<u32>,
    /// Seconds a client may take to send a request head, from accept and from its first byte [default: 10].
    #[arg(long, env = "LARDER_HEADER_READ_TIMEOUT", value_name = "DURATION", value_parser = parse_secs)]
    header_read_timeout: Option<u64>,
    /// Seconds a connection may stay open with no request under way [default: 60].
    #[arg(long, env = "LARDER_IDLE_TIMEOUT", value_name = "DURATION", value_parser = parse_secs)]
    idle_timeout: Option<u64>,
    /// Seconds a client may take to send a whole request body [default: 60].
    #[arg(long, env = "LARDER_REQUEST_BODY_TIMEOUT", value_name = "DURATION", value_parser = parse_secs)]
    request_body_timeout: Option<u64>,
    /// Seconds to connect to the app before answering 502 [default: 5].
    #[arg(long, env = "LARDER_UPSTREAM_CONNECT_TIMEOUT", value_name = "DURATION", value_parser = parse_secs)]
    upstream_connect_timeout: Option<u64>,
    /// Seconds to wait for the app's response head (and, for a response being stored, all of it) before
    /// answering 504 [default: 30].
    #[arg(long, env = "LARDER_UPSTREAM_TIMEOUT", value_name = "DURATION", value_parser = parse_secs)]
    upstream_timeout: Option<u64>,
    /// Seconds the app may go quiet in the middle of a response body [default: 30].
    #[arg(long, env = "LARDER_UPSTREAM_IDLE_TIMEOUT", value_name = "DURATION", value_parser = parse_secs)]
    upstream_idle_timeout: Option<u64>,
    /// Seconds to let in-flight requests finish after SIGTERM, SIGHUP or Ctrl-C [default: 30].
    #[arg(long, env = "LARDER_SHUTDOWN_GRACE", value_name = "DURATION", value_parser = parse_secs)]
    shutdown_grace: Option<u64>,
    /// Seconds an admin API connection may take to send a request head, and may stay open with no request under
    /// way [default: 5].
    #[arg(long, env = "LARDER_ADMIN_IDLE_TIMEOUT", value_name = "DURATION", value_parser = parse_secs)]
    admin_idle_timeout: Option<u64>,
    /// Admin API connections one client address may hold at once; a further one gets 503 [default: 16].
    #[arg(long, env = "LARDER_ADMIN_CONNECTIONS_PER_CLIENT", value_name = "N")]
    admin_connections_per_client: Option<usize>,
}

/// Each setting of the TOML file, with the flag and environment variable that set it (the tests check this list
/// against the configuration and the flags; docs/ARCHITECTURE.md shows the file).
#[cfg(test)]
const SETTINGS: &[(&str, &str, &str)] = &[
    ("upstream", "upstream", "LARDER_UPSTREAM"),
    ("listen", "listen", "LARDER_LISTEN"),
    ("admin", "admin", "LARDER_ADMIN"),
    ("admin_token", "admin-token", "LARDER_ADMIN_TOKEN"),
    ("admin_token_file", "admin-token-file", "LARDER_ADMIN_TOKEN_FILE"),
    ("admin_no_token", "admin-no-token", "LARDER_ADMIN_NO_TOKEN"),
    ("namespace", "namespace", "LARDER_NAMESPACE"),
    ("drop_query_params", "drop-query-params", "LARDER_DROP_QUERY_PARAMS"),
    ("cache_status_header", "cache-status-header", "LARDER_CACHE_STATUS_HEADER"),
    ("cache_status", "cache-status", "LARDER_CACHE_STATUS"),
    ("purge_from", "purge-from", "LARDER_PURGE_FROM"),
    ("trusted_proxies", "trusted-proxies", "LARDER_TRUSTED_PROXIES"),
    ("access_log", "access-log", "LARDER_ACCESS_LOG"),
    ("workers", "workers", "LARDER_WORKERS"),
    ("cache.store", "store", "LARDER_STORE"),
    ("cache.l1_bytes", "l1", "LARDER_L1"),
    ("cache.l1_ttl_ms", "l1-ttl", "LARDER_L1_TTL"),
    ("cache.outage_memory_bytes", "outage-memory", "LARDER_OUTAGE_MEMORY"),
    ("cache.capacity_bytes", "capacity", "LARDER_CAPACITY"),
    ("cache.max_entry_fraction", "max-entry-fraction", "LARDER_MAX_ENTRY_FRACTION"),
    ("cache.max_body_bytes", "max-body", "LARDER_MAX_BODY"),
    ("cache.fill_buffer_bytes", "fill-buffer", "LARDER_FILL_BUFFER"),
    ("cache.heuristic_max_secs", "heuristic-max", "LARDER_HEURISTIC_MAX"),
    ("cache.cache_set_cookie", "cache-set-cookie", "LARDER_CACHE_SET_COOKIE"),
    ("cache.stale_while_revalidate_secs", "stale-while-revalidate", "LARDER_STALE_WHILE_REVALIDATE"),
    ("cache.stale_if_error_secs", "stale-if-error", "LARDER_STALE_IF_ERROR"),
    ("cache.stale_wait_ms", "stale-wait", "LARDER_STALE_WAIT"),
    ("cache.revalidation_window_secs", "revalidation-window", "LARDER_REVALIDATION_WINDOW"),
    ("cache.hit_for_miss_secs", "hit-for-miss", "LARDER_HIT_FOR_MISS"),
    ("cache.honor_request_cache_control", "honor-request-cache-control", "LARDER_HONOR_REQUEST_CACHE_CONTROL"),
    ("cache.targeted_fields", "targeted-fields", "LARDER_TARGETED_FIELDS"),
    ("cache.surrogate_control", "surrogate-control", "LARDER_SURROGATE_CONTROL"),
    ("cache.compress", "compress", "LARDER_COMPRESS"),
    ("limits.max_header_bytes", "max-header", "LARDER_MAX_HEADER"),
    ("limits.max_request_body_bytes", "max-request-body", "LARDER_MAX_REQUEST_BODY"),
    ("limits.max_connections", "max-connections", "LARDER_MAX_CONNECTIONS"),
    ("limits.max_upstream_per_connection", "max-upstream-per-connection", "LARDER_MAX_UPSTREAM_PER_CONNECTION"),
    ("limits.max_concurrent_streams", "max-concurrent-streams", "LARDER_MAX_CONCURRENT_STREAMS"),
    ("limits.header_read_timeout_secs", "header-read-timeout", "LARDER_HEADER_READ_TIMEOUT"),
    ("limits.idle_timeout_secs", "idle-timeout", "LARDER_IDLE_TIMEOUT"),
    ("limits.request_body_timeout_secs", "request-body-timeout", "LARDER_REQUEST_BODY_TIMEOUT"),
    ("limits.upstream_connect_timeout_secs", "upstream-connect-timeout", "LARDER_UPSTREAM_CONNECT_TIMEOUT"),
    ("limits.upstream_timeout_secs", "upstream-timeout", "LARDER_UPSTREAM_TIMEOUT"),
    ("limits.upstream_idle_timeout_secs", "upstream-idle-timeout", "LARDER_UPSTREAM_IDLE_TIMEOUT"),
    ("limits.shutdown_grace_secs", "shutdown-grace", "LARDER_SHUTDOWN_GRACE"),
    ("limits.admin_idle_timeout_secs", "admin-idle-timeout", "LARDER_ADMIN_IDLE_TIMEOUT"),
    ("limits.admin_connections_per_client", "admin-connections-per-client", "LARDER_ADMIN_CONNECTIONS_PER_CLIENT"),
];

/// `true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0` (any case); anything else is an error that lists them.
fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Ok(true),
        "false" | "no" | "off" | "0" => Ok(false),
        other => Err(format!("{other:?} is not a boolean: use true/false, yes/no, on/off or 1/0")),
    }
}

/// Sets `target` when the flag (or its variable) was given.
fn set<T>(target: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *target = value;
    }
}

impl ServeArgs {
    /// Defaults, then the file, then flags and environment.
    pub fn config(&self) -> Result<ProxyConfig, Failure> {
        let mut config = match &self.config {
            Some(path) => ProxyConfig::from_file(path).map_err(|e| Failure::input(e.to_string()))?,
            None => ProxyConfig::default(),
        };
        if self.upstream.is_none() && self.config.is_none() {
            return Err(Failure::input("--upstream is required (or set upstream in --config)"));
        }
        let c = &mut config;
        set(&mut c.upstream, self.upstream.clone());
        set(&mut c.listen, self.listen);
        if self.no_admin {
            c.admin = None;
        } else if let Some(admin) = self.admin {
            c.admin = Some(admin);
        }
        // A token given here replaces the file's setting of either form, so the two never both apply.
        if let Some(token) = &self.admin_token {
            c.admin_token = Some(token.clone());
            c.admin_token_file.clear();
        }
        if let Some(file) = &self.admin_token_file {
            c.admin_token_file = file.clone();
            c.admin_token = None;
        }
        set(&mut c.admin_no_token, self.admin_no_token);
        set(&mut c.namespace, self.namespace.clone());
        set(&mut c.drop_query_params, self.drop_query_params.clone());
        set(&mut c.cache_status_header, self.cache_status_header.clone());
        set(&mut c.cache_status, self.cache_status);
        set(&mut c.purge_from, self.purge_from.clone());
        set(&mut c.trusted_proxies, self.trusted_proxies.clone());
        set(&mut c.access_log, self.access_log.clone());
        set(&mut c.workers, self.workers);
        let cache = &mut c.cache;
        set(&mut cache.store, self.store.clone());
        set(&mut cache.l1_bytes, self.l1);
        set(&mut cache.l1_ttl_ms, self.l1_ttl);
        set(&mut cache.outage_memory_bytes, self.outage_memory);
        set(&mut cache.capacity_bytes, self.capacity);
        set(&mut cache.max_entry_fraction, self.max_entry_fraction);
        set(&mut cache.max_body_bytes, self.max_body);
        set(&mut cache.fill_buffer_bytes, self.fill_buffer);
        set(&mut cache.heuristic_max_secs, self.heuristic_max);
        set(&mut cache.cache_set_cookie, self.cache_set_cookie);
        set(&mut cache.stale_while_revalidate_secs, self.stale_while_revalidate);
        set(&mut cache.stale_if_error_secs, self.stale_if_error);
        set(&mut cache.stale_wait_ms, self.stale_wait);
        set(&mut cache.revalidation_window_secs, self.revalidation_window);
        set(&mut cache.hit_for_miss_secs, self.hit_for_miss);
        set(&mut cache.honor_request_cache_control, self.honor_request_cache_control);
        set(&mut cache.targeted_fields, self.targeted_fields.clone());
        set(&mut cache.surrogate_control, self.surrogate_control);
        set(&mut cache.compress, self.compress.clone());
        let limits = &mut c.limits;
        set(&mut limits.max_header_bytes, self.max_header);
        set(&mut limits.max_request_body_bytes, self.max_request_body);
        set(&mut limits.max_connections, self.max_connections);
        set(&mut limits.max_upstream_per_connection, self.max_upstream_per_connection);
        set(&mut limits.max_concurrent_streams, self.max_concurrent_streams);
        set(&mut limits.header_read_timeout_secs, self.header_read_timeout);
        set(&mut limits.idle_timeout_secs, self.idle_timeout);
        set(&mut limits.request_body_timeout_secs, self.request_body_timeout);
        set(&mut limits.upstream_connect_timeout_secs, self.upstream_connect_timeout);
        set(&mut limits.upstream_timeout_secs, self.upstream_timeout);
        set(&mut limits.upstream_idle_timeout_secs, self.upstream_idle_timeout);
        set(&mut limits.shutdown_grace_secs, self.shutdown_grace);
        set(&mut limits.admin_idle_timeout_secs, self.admin_idle_timeout);
        set(&mut limits.admin_connections_per_client, self.admin_connections_per_client);
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
    if config.cache.store.is_empty() {
        let store = memory_store(&config)?;
        return serve(config, store);
    }
    // The shared store's connections and background tasks live on a runtime of their own, which outlives the
    // serving threads' runtimes and is not slowed by them.
    let store_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("larder-store")
        .enable_all()
        .build()
        .map_err(|e| Failure::input(format!("store runtime: {e}")))?;
    let l1_ttl = std::time::Duration::from_millis(config.cache.l1_ttl_ms);
    let store = store_runtime
        .block_on(larder_stores::open_tiered(&config.cache.store, config.cache.l1_bytes, l1_ttl))
        .map_err(|e| Failure::input(e.to_string()))?;
    tracing::info!(store = %larder_store::url::redact(&config.cache.store), l1_bytes = config.cache.l1_bytes, "shared store");
    serve(config, store)
}

fn serve<S: Store>(config: ProxyConfig, store: S) -> Result<(), Failure> {
    let server =
        Server::bind(config.clone(), store, Arc::new(SystemClock)).map_err(|e| Failure::input(e.to_string()))?;
    let shown = |addr: Option<std::net::SocketAddr>| addr.map_or_else(|| "off".to_owned(), |a| a.to_string());
    tracing::info!(
        listen = %shown(server.local_addr()),
        admin = %shown(server.admin_addr()),
        upstream = %config.upstream,
        capacity_bytes = config.cache.capacity_bytes,
        "larder is serving"
    );
    server.run_per_core(config.workers, shutdown_signal()).map_err(|e| Failure::input(e.to_string()))?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM, SIGHUP or Ctrl-C. larder does not reload its configuration, so SIGHUP (which a closing terminal also
/// sends) drains and stops like SIGTERM rather than killing requests in flight.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let unix_signals = async {
        use tokio::signal::unix::{signal, SignalKind};
        match (signal(SignalKind::terminate()), signal(SignalKind::hangup())) {
            (Ok(mut terminate), Ok(mut hangup)) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = hangup.recv() => tracing::info!("SIGHUP: draining and stopping (larder does not reload)"),
                }
            }
            _ => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let unix_signals = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = unix_signals => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Harness {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// Every key of the TOML configuration, as `section.key`.
    fn config_keys() -> Vec<String> {
        let value = toml::Value::try_from(ProxyConfig { admin_token: Some(String::new()), ..ProxyConfig::default() })
            .expect("the configuration serialises");
        let mut keys = Vec::new();
        for (key, value) in value.as_table().expect("a table") {
            match value.as_table() {
                Some(section) => keys.extend(section.keys().map(|k| format!("{key}.{k}"))),
                None => keys.push(key.clone()),
            }
        }
        keys
    }

    #[test]
    fn every_setting_has_a_flag_and_an_environment_variable() {
        let mut keys = config_keys();
        keys.sort();
        let mut listed: Vec<String> = SETTINGS.iter().map(|(key, _, _)| (*key).to_owned()).collect();
        listed.sort();
        assert_eq!(keys, listed, "SETTINGS lists exactly the configuration's keys");
        let command = Harness::command();
        for (key, flag, env) in SETTINGS {
            let arg = command.get_arguments().find(|a| a.get_long() == Some(*flag));
            let arg = arg.unwrap_or_else(|| panic!("{key}: no --{flag}"));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(*env), "{key}");
        }
    }

    #[test]
    fn flags_override_with_units_names_and_booleans() {
        let args = Harness::try_parse_from([
            "x",
            "--upstream=http://127.0.0.1:3000",
            "--listen=localhost:8090",
            "--capacity=1.5G",
            "--max-request-body=512K",
            "--cache-set-cookie",
            "--surrogate-control=off",
            "--trusted-proxies=10.0.0.0/8,192.0.2.7",
            "--compress=br",
            "--admin-no-token",
            "--purge-from=127.0.0.1,10.0.0.0/8",
            "--stale-if-error=5m",
            "--stale-wait=2s",
        ])
        .expect("parses");
        let config = args.serve.config().map_err(|f| f.message).expect("valid");
        assert_eq!(config.listen.port(), 8090);
        assert!(config.listen.ip().is_loopback());
        assert_eq!(config.cache.capacity_bytes, 3 << 29);
        assert_eq!(config.limits.max_request_body_bytes, 512 << 10);
        assert!(config.cache.cache_set_cookie && !config.cache.surrogate_control);
        assert_eq!(config.trusted_proxies, ["10.0.0.0/8", "192.0.2.7"]);
        assert!(config.admin_no_token);
        assert_eq!(config.purge_from, ["127.0.0.1", "10.0.0.0/8"]);
        assert_eq!((config.cache.stale_if_error_secs, config.cache.stale_wait_ms), (300, 2000), "durations take units");
        let no_token = Harness::try_parse_from(["x", "--upstream=http://a"]).expect("parses").serve.config();
        assert!(no_token.is_err_and(|f| f.message.contains("--admin-token")), "the admin API needs a token");
        for bad in ["--capacity=-1M", "--cache-set-cookie=maybe", "--compress=lzma", "--listen=nowhere.invalid:80"] {
            assert!(Harness::try_parse_from(["x", "--upstream=http://a", bad]).is_err(), "{bad}");
        }
        assert!(parse_bool("maybe").is_err_and(|e| e.contains("yes/no")));
    }
}
