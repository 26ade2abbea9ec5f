//! The proxy's settings: every field has a default, a TOML file overrides defaults, and `larder serve` flags and
//! environment variables override the file (see `larder serve --help` and docs/ARCHITECTURE.md). Sizes take the
//! same units everywhere (`size.rs`); addresses may be host names, resolved once at start.

pub mod duration;
pub mod size;
mod token;

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use http::HeaderName;
use serde::{Deserialize, Deserializer, Serialize};

use crate::forwarding::Networks;
use crate::rfc9111::Rules;

/// Everything `larder serve` can be told.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// The app larder fronts, e.g. `http://127.0.0.1:3000` (required). A path (`http://app/shop`) is a prefix put
    /// before every request's path.
    pub upstream: String,
    /// Where clients connect (a host name is resolved at start).
    #[serde(deserialize_with = "deserialize_addr")]
    pub listen: SocketAddr,
    /// The admin API (push, purge, metrics, health); loopback by default.
    #[serde(deserialize_with = "deserialize_optional_addr")]
    pub admin: Option<SocketAddr>,
    /// Bearer token for the admin API: required (or `admin_token_file`), unless `admin_no_token` opens a loopback
    /// admin API without one. A flag shows in `/proc/PID/cmdline` to every local user: prefer the file.
    pub admin_token: Option<String>,
    /// A file holding the admin API's bearer token (and at most one trailing newline), read once at start; refused
    /// when empty, unreadable or writable by every user (empty = none).
    pub admin_token_file: String,
    /// Run a loopback admin API without a token, open to every process on this host (browsers are still refused:
    /// JSON bodies, same-origin requests and the listener's own Host only). Refused for a non-loopback address.
    pub admin_no_token: bool,
    /// Key namespace (spec/FORMAT.md §5.2).
    pub namespace: String,
    /// Query parameters left out of cache keys and of the URL sent upstream (a trailing `*` makes a prefix).
    pub drop_query_params: Vec<String>,
    /// The response header that says HIT, MISS, STALE or BYPASS.
    pub cache_status_header: String,
    /// Send the RFC 9211 `Cache-Status` response header.
    pub cache_status: bool,
    /// Clients (addresses or networks) that may send `PURGE` on the main listener; empty = none (the admin API
    /// purges with its token). Every client a proxy in front of larder forwards arrives from that proxy's address,
    /// so naming a TLS terminator's address lets everyone behind it purge.
    pub purge_from: Vec<String>,
    /// Addresses or networks (`10.0.0.0/8`) of proxies in front of larder whose `X-Forwarded-*` and `Forwarded`
    /// fields are believed; every other client's are dropped.
    pub trusted_proxies: Vec<String>,
    /// Where to write one line per request ("-" = standard output; empty = no access log).
    pub access_log: String,
    /// Serving threads, each with its own runtime and listening socket (0 = one per core).
    pub workers: usize,
    pub cache: CacheSection,
    pub limits: LimitsSection,
}

/// How responses are cached.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheSection {
    /// A shared store to cache in (spec/STORES.md URL: `memcached://h1:11211,h2:11211`, `redis://host:6379/0`,
    /// `postgres://…`, `file:///…`); empty = the memory store alone, bounded by `capacity_bytes`.
    pub store: String,
    /// With `store`: a memory copy (L1) of this many bytes in front of it (0 = none, every read goes to the store).
    #[serde(deserialize_with = "size::deserialize_usize")]
    pub l1_bytes: usize,
    /// With an L1: the longest an L1 copy is used before the store is asked again, in milliseconds. This bounds how
    /// long another proxy's purge takes to reach this one.
    #[serde(deserialize_with = "duration::deserialize_ms")]
    pub l1_ttl_ms: u64,
    /// With `store` and no L1: memory for responses fetched while the store fails (spec/STORES.md §3, "When the
    /// store fails"), dropped when it answers again; with an L1, the L1 serves instead. 0 = off.
    #[serde(deserialize_with = "size::deserialize_usize")]
    pub outage_memory_bytes: usize,
    /// Memory store bound in bytes (keys, values and bookkeeping).
    #[serde(deserialize_with = "size::deserialize_usize")]
    pub capacity_bytes: usize,
    /// Largest entry, as a fraction of capacity.
    pub max_entry_fraction: f64,
    /// Largest response body that is cached, and the largest a stored body may decode to; larger ones stream
    /// through.
    #[serde(deserialize_with = "size::deserialize_usize")]
    pub max_body_bytes: usize,
    /// Bytes all fills under way may buffer together before further cacheable responses stream through uncached
    /// (0 = a quarter of capacity_bytes, and at least max_body_bytes so that one largest body always fits).
    #[serde(deserialize_with = "size::deserialize_usize")]
    pub fill_buffer_bytes: usize,
    /// Give responses without explicit freshness 10% of their age since Last-Modified, up to this many seconds
    /// (0 = off, the default: the app says what may be cached).
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub heuristic_max_secs: u64,
    /// Cache responses that set cookies.
    pub cache_set_cookie: bool,
    /// stale-while-revalidate for responses that do not give one, in seconds.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub stale_while_revalidate_secs: u64,
    /// stale-if-error for responses that do not give one, in seconds.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub stale_if_error_secs: u64,
    /// How long a request waits for a refresh under way before it is answered with the stale response (within
    /// stale-if-error), in milliseconds.
    #[serde(deserialize_with = "duration::deserialize_ms")]
    pub stale_wait_ms: u64,
    /// How long stale responses with validators are kept for conditional revalidation, in seconds.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub revalidation_window_secs: u64,
    /// How long to remember that a URL's response could not be stored, sending its requests straight upstream in
    /// parallel instead of one at a time (Varnish's hit-for-miss), in seconds (0 = off).
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub hit_for_miss_secs: u64,
    /// Honour client `Cache-Control` / `Pragma` request directives (off: clients cannot force the app to work).
    pub honor_request_cache_control: bool,
    /// Fields that address this cache specifically (RFC 9213), first match wins.
    pub targeted_fields: Vec<String>,
    /// Honour `Surrogate-Control` (and remove it from responses).
    pub surrogate_control: bool,
    /// The coding offered to clients that accept it when a stored body has none: "off", "gzip", "br" or "zstd".
    /// A body is compressed once, on the first request that accepts it, and kept beside the original.
    pub compress: String,
}

/// Protection against slow, large or too many clients and a slow upstream.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    /// Request head size; larger heads get 431.
    #[serde(deserialize_with = "size::deserialize_usize")]
    pub max_header_bytes: usize,
    /// Request body size; larger bodies get 413.
    #[serde(deserialize_with = "size::deserialize_u64")]
    pub max_request_body_bytes: u64,
    /// Concurrent client connections; more wait in the listen backlog.
    pub max_connections: usize,
    /// Upstream requests one client connection may have under way (HTTP/2 multiplexes many requests on one).
    pub max_upstream_per_connection: usize,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// Seconds a client may take to send a request head, from accepting the connection and from its first byte.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub header_read_timeout_secs: u64,
    /// Seconds a connection may stay open with no request under way (keep-alive idle, HTTP/2 included).
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub idle_timeout_secs: u64,
    /// Seconds a client may take to send a whole request body.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub request_body_timeout_secs: u64,
    /// Seconds to connect to the upstream (then 502).
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub upstream_connect_timeout_secs: u64,
    /// Seconds to wait for the upstream's response head (then 504); a response being stored must also arrive
    /// whole within this.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub upstream_timeout_secs: u64,
    /// Seconds the upstream may go quiet in the middle of a response body before larder gives up on it.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub upstream_idle_timeout_secs: u64,
    /// Seconds to let in-flight requests finish after SIGTERM or SIGHUP.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub shutdown_grace_secs: u64,
    /// Seconds an admin API connection may take to send a request head (from accept and from its first byte) and
    /// may stay open with no request under way: short, so idle connections cannot hold the admin API's slots.
    #[serde(deserialize_with = "duration::deserialize_secs")]
    pub admin_idle_timeout_secs: u64,
    /// Admin API connections one client address may hold at once; a further one is answered 503 and closed.
    pub admin_connections_per_client: usize,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            upstream: String::new(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin: Some(SocketAddr::from(([127, 0, 0, 1], 8081))),
            admin_token: None,
            admin_token_file: String::new(),
            admin_no_token: false,
            namespace: String::new(),
            drop_query_params: larder_format::key::DEFAULT_DROP_PARAMS.iter().map(|s| (*s).to_owned()).collect(),
            cache_status_header: "x-cache".into(),
            cache_status: true,
            purge_from: Vec::new(),
            trusted_proxies: Vec::new(),
            access_log: String::new(),
            workers: 0,
            cache: CacheSection::default(),
            limits: LimitsSection::default(),
        }
    }
}

impl Default for CacheSection {
    fn default() -> Self {
        CacheSection {
            store: String::new(),
            l1_bytes: 0,
            l1_ttl_ms: 1000,
            outage_memory_bytes: 64 << 20,
            capacity_bytes: 256 << 20,
            max_entry_fraction: 1.0 / 16.0,
            max_body_bytes: 8 << 20,
            fill_buffer_bytes: 0,
            heuristic_max_secs: 0,
            cache_set_cookie: false,
            stale_while_revalidate_secs: 0,
            stale_if_error_secs: 300,
            stale_wait_ms: 1000,
            revalidation_window_secs: 3600,
            hit_for_miss_secs: 60,
            honor_request_cache_control: false,
            targeted_fields: vec!["CDN-Cache-Control".into()],
            surrogate_control: true,
            compress: "gzip".into(),
        }
    }
}

impl Default for LimitsSection {
    fn default() -> Self {
        LimitsSection {
            max_header_bytes: 16 << 10,
            max_request_body_bytes: 16 << 20,
            max_connections: 10_000,
            max_upstream_per_connection: 32,
            max_concurrent_streams: 100,
            header_read_timeout_secs: 10,
            idle_timeout_secs: 60,
            request_body_timeout_secs: 60,
            upstream_connect_timeout_secs: 5,
            upstream_timeout_secs: 30,
            upstream_idle_timeout_secs: 30,
            shutdown_grace_secs: 30,
            admin_idle_timeout_secs: 5,
            admin_connections_per_client: 16,
        }
    }
}

/// A configuration that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error(
        "upstream {0:?} is not an http:// URL with a host (and no query or fragment), such as http://127.0.0.1:3000"
    )]
    Upstream(String),
    #[error(
        "the admin API ({0}) needs a token: give --admin-token-file FILE (or LARDER_ADMIN_TOKEN_FILE, or \
         admin_token_file in the file), or LARDER_ADMIN_TOKEN (--admin-token TOKEN shows in the process list); \
         --admin-no-token leaves a loopback admin API open to every local process; --no-admin turns it off"
    )]
    AdminWithoutToken(SocketAddr),
    #[error("--admin-no-token is for a loopback admin API only, and {0} is not loopback: give --admin-token")]
    AdminOpenBeyondLoopback(SocketAddr),
    #[error("{field}: {message}")]
    Invalid { field: &'static str, message: String },
}

/// Resolves `host:port` (a literal address, or a name such as `localhost:8090`) to its first address.
pub fn resolve_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let mut addrs = text
        .to_socket_addrs()
        .map_err(|e| format!("{text:?} is not an address such as 127.0.0.1:8080 or localhost:8080 ({e})"))?;
    addrs.next().ok_or_else(|| format!("{text:?} resolves to no address"))
}

fn deserialize_addr<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(deserializer)?;
    resolve_addr(&text).map_err(serde::de::Error::custom)
}

fn deserialize_optional_addr<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<SocketAddr>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    text.filter(|t| !t.is_empty()).map(|t| resolve_addr(&t).map_err(serde::de::Error::custom)).transpose()
}

impl ProxyConfig {
    /// Reads a TOML file over the defaults.
    pub fn from_file(path: &std::path::Path) -> Result<ProxyConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        toml::from_str(&text).map_err(|e| {
            // One line: where, then what (toml's own Display draws the line with a caret over several).
            let at = e.span().map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {column}: ")
            });
            let message = format!("{}{}", at.unwrap_or_default(), e.message().trim().replace('\n', " "));
            ConfigError::Parse { path: path.display().to_string(), message }
        })
    }

    /// Checks the settings that would otherwise fail later, or silently.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.upstream.is_empty() {
            return Err(ConfigError::Invalid {
                field: "upstream",
                message: "is required: the app to front, such as http://127.0.0.1:3000".into(),
            });
        }
        let upstream: http::Uri = self.upstream.parse().map_err(|_| ConfigError::Upstream(self.upstream.clone()))?;
        let has_query = upstream.path_and_query().is_some_and(|p| p.query().is_some()) || self.upstream.contains('#');
        if upstream.scheme_str() != Some("http") || upstream.host().is_none() || has_query {
            return Err(ConfigError::Upstream(self.upstream.clone()));
        }
        for field in &self.cache.targeted_fields {
            HeaderName::try_from(field.as_str()).map_err(|_| ConfigError::Invalid {
                field: "cache.targeted_fields",
                message: format!("{field:?} is not a header name"),
            })?;
        }
        HeaderName::try_from(self.cache_status_header.as_str()).map_err(|_| ConfigError::Invalid {
            field: "cache_status_header",
            message: format!("{:?} is not a header name", self.cache_status_header),
        })?;
        crate::encoding::offered_coding(&self.cache.compress)
            .map_err(|message| ConfigError::Invalid { field: "cache.compress", message })?;
        Networks::parse(&self.trusted_proxies)
            .map_err(|message| ConfigError::Invalid { field: "trusted_proxies", message })?;
        Networks::parse(&self.purge_from).map_err(|message| ConfigError::Invalid { field: "purge_from", message })?;
        let at_least_one = [
            ("limits.max_connections", self.limits.max_connections as u64),
            ("limits.max_upstream_per_connection", self.limits.max_upstream_per_connection as u64),
            ("limits.max_concurrent_streams", u64::from(self.limits.max_concurrent_streams)),
            ("limits.header_read_timeout_secs", self.limits.header_read_timeout_secs),
            ("limits.idle_timeout_secs", self.limits.idle_timeout_secs),
            ("limits.upstream_timeout_secs", self.limits.upstream_timeout_secs),
            ("limits.upstream_idle_timeout_secs", self.limits.upstream_idle_timeout_secs),
            ("limits.request_body_timeout_secs", self.limits.request_body_timeout_secs),
            ("limits.admin_idle_timeout_secs", self.limits.admin_idle_timeout_secs),
            ("limits.admin_connections_per_client", self.limits.admin_connections_per_client as u64),
        ];
        for (field, value) in at_least_one {
            if value == 0 {
                return Err(ConfigError::Invalid { field, message: "must be at least 1".into() });
            }
        }
        if !(self.cache.max_entry_fraction > 0.0 && self.cache.max_entry_fraction <= 1.0) {
            return Err(ConfigError::Invalid {
                field: "cache.max_entry_fraction",
                message: format!("{} is not a fraction in (0, 1]", self.cache.max_entry_fraction),
            });
        }
        if self.cache.store.is_empty() && self.cache.l1_bytes > 0 {
            return Err(ConfigError::Invalid {
                field: "cache.l1_bytes",
                message: "an L1 is a memory copy in front of a shared store: give --store too (without one, \
                          --capacity sizes the memory store)"
                    .into(),
            });
        }
        // Last, so that a mistake in another setting is reported first.
        if let Some(admin) = self.admin {
            let has_token = self.admin_token()?.is_some();
            if self.admin_no_token && !admin.ip().is_loopback() {
                return Err(ConfigError::AdminOpenBeyondLoopback(admin));
            }
            if !has_token && !self.admin_no_token {
                return Err(ConfigError::AdminWithoutToken(admin));
            }
        }
        Ok(())
    }

    /// The admin API's bearer token: `admin_token`, or the contents of `admin_token_file` (read now); `None` when
    /// neither is given. Both at once is an error: one of them would be silently ignored.
    pub fn admin_token(&self) -> Result<Option<String>, ConfigError> {
        let given = self.admin_token.as_deref().filter(|t| !t.is_empty());
        match (given, self.admin_token_file.as_str()) {
            (Some(_), file) if !file.is_empty() => Err(ConfigError::Invalid {
                field: "admin_token_file",
                message: "give the admin token once: admin_token or admin_token_file, not both".into(),
            }),
            (Some(token), _) => Ok(Some(token.to_owned())),
            (None, "") => Ok(None),
            (None, file) => token::read_token_file(std::path::Path::new(file)).map(Some),
        }
    }

    /// The caching rules these settings describe.
    pub fn rules(&self) -> Rules {
        let c = &self.cache;
        Rules {
            targeted_fields: c.targeted_fields.iter().filter_map(|f| HeaderName::try_from(f.as_str()).ok()).collect(),
            surrogate_control: c.surrogate_control,
            heuristic_cap: (c.heuristic_max_secs > 0).then(|| Duration::from_secs(c.heuristic_max_secs)),
            cache_set_cookie: c.cache_set_cookie,
            default_stale_while_revalidate: Duration::from_secs(c.stale_while_revalidate_secs),
            default_stale_if_error: Duration::from_secs(c.stale_if_error_secs),
            revalidation_window: Duration::from_secs(c.revalidation_window_secs),
            honor_request_directives: c.honor_request_cache_control,
        }
    }

    /// The bytes all fills may buffer at once.
    pub fn fill_buffer_bytes(&self) -> usize {
        match self.cache.fill_buffer_bytes {
            0 => (self.cache.capacity_bytes / 4).max(self.cache.max_body_bytes),
            n => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_overrides_defaults_and_unknown_keys_are_errors() {
        let config: ProxyConfig = toml::from_str(
            "upstream = \"http://app:3000\"\nlisten = \"0.0.0.0:80\"\n[cache]\ncapacity_bytes = 1048576\nstale_if_error_secs = 60\n",
        )
        .expect("parses");
        assert_eq!(config.cache.capacity_bytes, 1 << 20);
        assert_eq!(config.cache.max_body_bytes, 8 << 20, "untouched fields keep their defaults");
        assert_eq!(config.rules().default_stale_if_error, Duration::from_secs(60));
        assert!(toml::from_str::<ProxyConfig>("upstream_url = \"x\"").is_err());
        let units: ProxyConfig =
            toml::from_str("listen = \"localhost:8090\"\n[cache]\ncapacity_bytes = \"1.5G\"\n").expect("parses");
        assert_eq!(units.cache.capacity_bytes, 3 << 29);
        assert_eq!(units.listen.port(), 8090);
        assert!(units.listen.ip().is_loopback(), "localhost resolves");
        let negative = toml::from_str::<ProxyConfig>("[cache]\ncapacity_bytes = \"-1M\"\n").map_err(|e| e.to_string());
        assert!(negative.is_err_and(|e| e.contains("negative")));
    }

    /// The configuration reference in docs/ARCHITECTURE.md parses and lists exactly the defaults.
    #[test]
    fn the_documented_configuration_is_the_default() {
        let doc = include_str!("../../../../docs/ARCHITECTURE.md");
        let section = doc.split("### Configuration").nth(1).expect("the configuration section");
        let block = section.split("```toml").nth(1).and_then(|b| b.split("```").next()).expect("a toml block");
        let documented: ProxyConfig = toml::from_str(block).expect("the documented configuration parses");
        assert_eq!(
            format!("{documented:?}"),
            format!("{:?}", ProxyConfig { admin_token: Some(String::new()), ..ProxyConfig::default() })
        );
    }

    #[test]
    fn validation_catches_what_would_fail_later() {
        let ok = ProxyConfig {
            upstream: "http://127.0.0.1:3000".into(),
            admin_token: Some("s3cret".into()),
            ..ProxyConfig::default()
        };
        assert!(ok.validate().is_ok());
        assert!(
            matches!(
                ProxyConfig { admin_no_token: true, ..ProxyConfig::default() }.validate(),
                Err(ConfigError::Invalid { field: "upstream", .. })
            ),
            "upstream is required"
        );
        let app = |c: ProxyConfig| ProxyConfig { upstream: ok.upstream.clone(), ..c };
        assert!(
            matches!(app(ProxyConfig::default()).validate(), Err(ConfigError::AdminWithoutToken(_))),
            "the admin API needs a token by default"
        );
        let open = app(ProxyConfig { admin_no_token: true, ..ProxyConfig::default() });
        assert!(open.validate().is_ok(), "unless the operator opens a loopback one");
        let no_admin = app(ProxyConfig { admin: None, ..ProxyConfig::default() });
        assert!(no_admin.validate().is_ok());
        let open_wide = ProxyConfig { admin: Some("0.0.0.0:8081".parse().expect("addr")), ..open };
        assert!(matches!(open_wide.validate(), Err(ConfigError::AdminOpenBeyondLoopback(_))));
        let bad_purge = ProxyConfig { purge_from: vec!["everyone".into()], ..ok.clone() };
        assert!(bad_purge.validate().is_err());
        let bad_upstream = ProxyConfig { upstream: "https://app".into(), ..ProxyConfig::default() };
        assert!(matches!(bad_upstream.validate(), Err(ConfigError::Upstream(_))));
        let open_admin =
            app(ProxyConfig { admin: Some("0.0.0.0:8081".parse().expect("addr")), ..ProxyConfig::default() });
        assert!(matches!(open_admin.validate(), Err(ConfigError::AdminWithoutToken(_))));
        let tokened = ProxyConfig { admin_token: Some("s3cret".into()), ..open_admin };
        assert!(tokened.validate().is_ok());
        let with_path = ProxyConfig { upstream: "http://app:3000/shop".into(), ..ok.clone() };
        assert!(with_path.validate().is_ok(), "a path is a prefix");
        let with_query = ProxyConfig { upstream: "http://app:3000/?x=1".into(), ..ProxyConfig::default() };
        assert!(matches!(with_query.validate(), Err(ConfigError::Upstream(_))));
        let bad_proxy = ProxyConfig { trusted_proxies: vec!["10.0.0.0/99".into()], ..ProxyConfig::default() };
        assert!(bad_proxy.validate().is_err());
    }
}
