//! The request as larder understands it. Every client byte is hostile, and larder is a *shared* cache: one
//! client's request must never decide what another receives. So a request is checked and normalised once, here,
//! and everything after works from the result:
//!
//! - its authority (Host, `:authority`, or an absolute-form target's, RFC 9112 §3.2.2) must be a plain `host[:port]`;
//!   a missing, repeated or malformed one is refused (400) rather than guessed at;
//! - framing must be unambiguous: GET and HEAD carry no body, and the only transfer coding accepted is `chunked`;
//! - hop-by-hop fields (and every field `Connection` names) are removed, and so are forwarding fields a client may
//!   not set (forwarding.rs);
//! - the target is normalised exactly as the cache key normalises it (dropped tracking parameters, sorted query).
//!
//! What is left — method, scheme, authority, target, headers — is both what the key and `Vary` are computed from
//! and what is sent upstream, so the two cannot disagree.

use std::net::SocketAddr;

use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode, Version};
use larder_format::key::{http_key_parts, key_authority, KeyOptions, KeyParts};

use crate::forwarding::{self, Networks, FORWARDING_FIELDS, METHOD_OVERRIDE_FIELDS, REROUTING_FIELDS};
use crate::rfc9111::headers::{is_always_hop_by_hop, strip_hop_by_hop};

/// What larder does with a request, by its method and target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// GET or HEAD: looked up in the cache.
    Cacheable,
    /// `PURGE`: removes the URL's stored responses (from allowed addresses).
    Purge,
    /// Any other method: streamed to the upstream; unsafe ones invalidate what they may change.
    Forward,
    /// `OPTIONS *`: a question about the server itself, answered by larder.
    ServerOptions,
}

/// A request larder refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub status: StatusCode,
    pub message: &'static str,
    /// The short reason, for `Cache-Status` detail and the access log.
    pub detail: &'static str,
}

impl Rejection {
    fn bad(message: &'static str, detail: &'static str) -> Rejection {
        Rejection { status: StatusCode::BAD_REQUEST, message, detail }
    }
}

/// What the request path needs from the configuration to read a request.
#[derive(Debug, Clone, Default)]
pub struct RequestRules {
    pub key_options: KeyOptions,
    pub trusted_proxies: Networks,
}

/// A checked, normalised request.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub method: Method,
    /// `http`, or `https` when a trusted proxy says so.
    pub scheme: &'static str,
    /// `host[:port]`, lowercase, without a default port: the key's authority and the `Host` sent upstream.
    pub authority: String,
    /// Path and query as the key normalises them; sent upstream as is.
    pub target: String,
    /// The end-to-end fields larder forwards (`Host` included, set to `authority`).
    pub headers: HeaderMap,
    pub client: SocketAddr,
    /// The store key of the URL (GET and HEAD share it).
    pub key: String,
    /// The client connection's upstream slots (see connection.rs), once the request is being served.
    pub upstream_slots: Option<std::sync::Arc<tokio::sync::Semaphore>>,
}

impl RequestContext {
    /// Checks and normalises a request head.
    pub fn parse(parts: Parts, client: SocketAddr, rules: &RequestRules) -> Result<(RequestContext, Route), Rejection> {
        let Parts { method, uri, version, mut headers, .. } = parts;
        if method == Method::CONNECT {
            return Err(Rejection {
                status: StatusCode::METHOD_NOT_ALLOWED,
                message: "larder is a reverse proxy: CONNECT tunnels are not offered",
                detail: "connect",
            });
        }
        let raw_target = uri.path_and_query().map_or("/", |p| p.as_str());
        let route = if raw_target == "*" {
            if method != Method::OPTIONS {
                return Err(Rejection::bad("the asterisk target is only for OPTIONS", "bad-target"));
            }
            Route::ServerOptions
        } else if !raw_target.starts_with('/') {
            return Err(Rejection::bad("the request target must be a path or an absolute http URL", "bad-target"));
        } else if method == Method::GET || method == Method::HEAD {
            Route::Cacheable
        } else if method.as_str() == "PURGE" {
            Route::Purge
        } else {
            Route::Forward
        };
        let fields = FieldScan::of(&headers);
        check_framing(&method, &fields)?;
        let authority = request_authority(&uri, version, &fields)?;
        let (strip, forwarding) = (fields.strip, fields.forwarding);
        if strip {
            strip_fields_not_forwarded(&mut headers);
        }
        let (scheme, authority) = if forwarding {
            let trusted = !rules.trusted_proxies.is_empty() && rules.trusted_proxies.contains(client.ip());
            forwarding_policy(&mut headers, &method, trusted, authority)?
        } else {
            ("http", authority)
        };
        let KeyParts { authority, target, key } =
            http_key_parts("GET", scheme, &authority, raw_target, &rules.key_options);
        // Host says exactly the authority keyed on (most requests already do: then it is left alone).
        if headers.get(HOST).is_none_or(|sent| sent.as_bytes() != authority.as_bytes()) {
            if let Ok(host) = HeaderValue::from_str(&authority) {
                headers.insert(HOST, host);
            }
        }
        let context = RequestContext { method, scheme, authority, target, headers, client, key, upstream_slots: None };
        Ok((context, route))
    }

    /// The request's URL as larder keys it (for logs and purge messages).
    pub fn url(&self) -> String {
        format!("{}://{}{}", self.scheme, self.authority, self.target)
    }

    /// The value this request has, as sent upstream, of a header a response varies on. Forwarding fields are
    /// the ones larder sets, so a response that varies on them is selected by what the app was actually told.
    pub fn vary_view(&self, names: &[String]) -> std::borrow::Cow<'_, HeaderMap> {
        if !names.iter().any(|n| forwarding::SET_BY_LARDER.contains(&n.as_str())) {
            return std::borrow::Cow::Borrowed(&self.headers);
        }
        let mut view = self.headers.clone();
        forwarding::add_forwarding(&mut view, self.client.ip(), self.scheme, &self.authority);
        std::borrow::Cow::Owned(view)
    }
}

/// What one pass over a request's fields finds: its Host lines and framing fields, and whether any field must be
/// removed before forwarding or is a forwarding field. Most requests carry nothing to remove, and then nothing else
/// looks at their fields again.
struct FieldScan<'h> {
    host: Option<&'h HeaderValue>,
    hosts: usize,
    transfer_codings: usize,
    chunked_only: bool,
    declares_length: bool,
    /// A hop-by-hop, framing or `Expect` field is present.
    strip: bool,
    /// A forwarding, rerouting or method-override field is present.
    forwarding: bool,
}

impl<'h> FieldScan<'h> {
    fn of(headers: &'h HeaderMap) -> FieldScan<'h> {
        let mut scan = FieldScan {
            host: None,
            hosts: 0,
            transfer_codings: 0,
            chunked_only: false,
            declares_length: false,
            strip: false,
            forwarding: false,
        };
        for (name, value) in headers {
            if name == HOST {
                scan.hosts += 1;
                scan.host = Some(value);
            } else if name == TRANSFER_ENCODING {
                scan.transfer_codings += 1;
                scan.chunked_only = value.to_str().is_ok_and(|v| v.trim().eq_ignore_ascii_case("chunked"));
                scan.strip = true;
            } else if name == CONTENT_LENGTH {
                // hyper has already refused differing or malformed lengths; a zero length is an empty body.
                scan.declares_length |= value.as_bytes().iter().any(|b| *b != b'0');
                scan.strip = true;
            } else if name == http::header::EXPECT || is_always_hop_by_hop(name) {
                scan.strip = true;
            } else if forwarding::is_forwarding_related(name) {
                scan.forwarding = true;
            }
        }
        scan
    }
}

/// Removes, in place, what is never forwarded: hop-by-hop fields and the fields `Connection` names, the framing
/// fields (hyper writes them for the body larder sends) and `Expect` (larder answers it itself).
fn strip_fields_not_forwarded(headers: &mut HeaderMap) {
    strip_hop_by_hop(headers);
    headers.remove(CONTENT_LENGTH);
    headers.remove(http::header::EXPECT);
}

/// GET and HEAD carry no body (a shared response is keyed on the URL alone, and a body larder would not forward
/// would be read by the app as the next request); other methods may use `chunked` and nothing else.
fn check_framing(method: &Method, fields: &FieldScan<'_>) -> Result<(), Rejection> {
    let bodiless = *method == Method::GET || *method == Method::HEAD;
    if bodiless && (fields.transfer_codings > 0 || fields.declares_length) {
        return Err(Rejection::bad("a GET or HEAD request may not carry a body", "body-on-get"));
    }
    if fields.transfer_codings > 0 && !(fields.transfer_codings == 1 && fields.chunked_only) {
        return Err(Rejection {
            status: StatusCode::NOT_IMPLEMENTED,
            message: "the only transfer coding larder accepts is chunked",
            detail: "transfer-coding",
        });
    }
    Ok(())
}

/// The authority the request names: an absolute-form target's (which wins over Host, RFC 9112 §3.2.2), HTTP/2's
/// `:authority` (which Host must not contradict, RFC 9113 §8.3.1), or the one Host field an HTTP/1.1 request must
/// carry (RFC 9112 §3.2).
fn request_authority(uri: &http::Uri, version: Version, fields: &FieldScan<'_>) -> Result<String, Rejection> {
    if fields.hosts > 1 {
        return Err(Rejection::bad("more than one Host field", "bad-host"));
    }
    let host = match fields.host {
        Some(value) => {
            let text = value.to_str().map_err(|_| Rejection::bad("the Host field is not ASCII", "bad-host"))?;
            if !valid_authority(text) {
                return Err(Rejection::bad("the Host field is not a valid host[:port]", "bad-host"));
            }
            Some(text)
        }
        None => None,
    };
    if let Some(authority) = uri.authority() {
        if !matches!(uri.scheme_str(), Some("http")) {
            return Err(Rejection::bad("larder serves http: only http targets are accepted", "bad-target"));
        }
        if !valid_authority(authority.as_str()) {
            return Err(Rejection::bad("the target's authority is not a valid host[:port]", "bad-host"));
        }
        if version == Version::HTTP_2 {
            let agrees = host.is_none_or(|h| key_authority("http", h) == key_authority("http", authority.as_str()));
            if !agrees {
                return Err(Rejection::bad("Host and :authority name different hosts", "bad-host"));
            }
        } else if host.is_none() && version == Version::HTTP_11 {
            return Err(Rejection::bad("an HTTP/1.1 request must carry a Host field", "missing-host"));
        }
        return Ok(authority.as_str().to_owned());
    }
    match host {
        Some(host) => Ok(host.to_owned()),
        None => Err(Rejection::bad("the request names no host (Host field or :authority)", "missing-host")),
    }
}

/// `host[:port]`: a DNS-style name (letters, digits, `-`, `.`, `_`, `~`), an IPv4 address, or a bracketed IPv6
/// literal, then an optional port of at most five digits. Stricter than RFC 3986's reg-name on purpose: no
/// userinfo, path, query, percent-escape or sub-delimiter can ride along into a key.
pub fn valid_authority(text: &str) -> bool {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((literal, after)) = rest.split_once(']') else { return false };
        if literal.is_empty() || !literal.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
            return false;
        }
        match after {
            "" => return true,
            _ => match after.strip_prefix(':') {
                Some(port) => ("[]", port),
                None => return false,
            },
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, port),
            None => (text, ""),
        }
    };
    let host_ok = host == "[]"
        || (!host.is_empty()
            && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')));
    let port_ok = port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u32>().map_or(port.is_empty(), |p| p <= 65535);
    host_ok && port_ok
}

/// Removes the forwarding fields a client may not set (or, from a trusted proxy, reads its claims), and the
/// rerouting fields from everyone. Returns the request's scheme and authority.
fn forwarding_policy(
    headers: &mut HeaderMap,
    method: &Method,
    trusted: bool,
    authority: String,
) -> Result<(&'static str, String), Rejection> {
    let present: Vec<HeaderName> = headers.keys().filter(|n| forwarding::is_forwarding_related(n)).cloned().collect();
    let shared = *method == Method::GET || *method == Method::HEAD;
    for name in &present {
        let name_str = name.as_str();
        let drop = REROUTING_FIELDS.contains(&name_str)
            || (shared && METHOD_OVERRIDE_FIELDS.contains(&name_str))
            || (!trusted && FORWARDING_FIELDS.contains(&name_str));
        if drop {
            headers.remove(name);
        }
    }
    if !trusted {
        return Ok(("http", authority));
    }
    let claimed = forwarding::claimed(headers).map_err(|message| Rejection::bad(message, "bad-forwarding"))?;
    let scheme = match claimed.proto.as_deref() {
        Some("https") => "https",
        _ => "http",
    };
    let authority = match claimed.host {
        Some(host) if valid_authority(&host) => host,
        Some(_) => return Err(Rejection::bad("the forwarded host is not a valid host[:port]", "bad-forwarding")),
        None => authority,
    };
    Ok((scheme, authority))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(request: http::Request<()>) -> Result<(RequestContext, Route), Rejection> {
        let (parts, ()) = request.into_parts();
        RequestContext::parse(parts, "192.0.2.1:5000".parse().expect("addr"), &RequestRules::default())
    }

    fn get(uri: &str, headers: &[(&str, &str)]) -> Result<(RequestContext, Route), Rejection> {
        let mut builder = http::Request::get(uri);
        for (n, v) in headers {
            builder = builder.header(*n, *v);
        }
        parse(builder.body(()).expect("request"))
    }

    #[test]
    fn authorities_are_plain_host_and_port() {
        for good in ["shop.example", "shop.example:8080", "127.0.0.1", "[::1]", "[::1]:80", "a_b.example", "host:"] {
            assert!(valid_authority(good), "{good}");
        }
        for bad in [
            "victim/a",
            "evil.example/x@victim.example",
            "user@host",
            "host:99999",
            "host:8o",
            "",
            "[::1",
            "[::1]x",
            "a b",
            "host?x",
            "host#x",
            "ho%73t",
            "a,b",
        ] {
            assert!(!valid_authority(bad), "{bad}");
        }
    }

    #[test]
    fn hosts_that_are_missing_repeated_or_malformed_are_refused() {
        assert_eq!(get("/", &[("host", "victim/a")]).map(|_| ()).unwrap_err().status, StatusCode::BAD_REQUEST);
        assert!(get("/", &[("host", "a.example"), ("host", "b.example")]).is_err());
        assert!(get("/", &[]).is_err(), "HTTP/1.1 without Host");
        let (ctx, route) = get("/p?b=2&a=1&utm_source=x", &[("host", "Shop.Example:80")]).expect("valid");
        assert_eq!(
            (ctx.authority.as_str(), ctx.target.as_str(), route),
            ("shop.example", "/p?a=1&b=2", Route::Cacheable)
        );
        assert_eq!(ctx.key, "GET:http://shop.example/p?a=1&b=2");
        assert_eq!(ctx.headers.get(HOST).and_then(|v| v.to_str().ok()), Some("shop.example"));
    }

    #[test]
    fn an_absolute_target_names_the_host() {
        let (ctx, _) = get("http://real.example/x", &[("host", "other.example")]).expect("valid");
        assert_eq!(ctx.authority, "real.example");
        assert_eq!(ctx.headers.get(HOST).and_then(|v| v.to_str().ok()), Some("real.example"));
        assert!(get("https://real.example/x", &[("host", "real.example")]).is_err());
    }

    #[test]
    fn framing_must_be_unambiguous() {
        assert!(get("/", &[("host", "a"), ("content-length", "5")]).is_err());
        assert!(get("/", &[("host", "a"), ("content-length", "0")]).is_ok());
        assert!(get("/", &[("host", "a"), ("transfer-encoding", "chunked")]).is_err());
        let post = |te: &str| {
            parse(http::Request::post("/").header("host", "a").header("transfer-encoding", te).body(()).expect("r"))
        };
        assert_eq!(post("gzip, chunked").map(|_| ()).unwrap_err().status, StatusCode::NOT_IMPLEMENTED);
        assert!(post("Chunked").is_ok());
        let connect = parse(http::Request::connect("a:443").header("host", "a:443").body(()).expect("r"));
        assert_eq!(connect.map(|_| ()).unwrap_err().status, StatusCode::METHOD_NOT_ALLOWED);
    }

    #[test]
    fn connection_listed_and_forwarding_fields_are_not_kept() {
        let (ctx, _) = get(
            "/",
            &[
                ("host", "a"),
                ("connection", "cookie, x-private"),
                ("cookie", "s=1"),
                ("x-private", "1"),
                ("x-forwarded-host", "evil.example"),
                ("x-original-url", "/admin"),
                ("x-http-method-override", "DELETE"),
                ("accept", "text/html"),
            ],
        )
        .expect("valid");
        let names: Vec<&str> = ctx.headers.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["host", "accept"]);
    }

    #[test]
    fn a_trusted_proxy_names_the_scheme_and_host() {
        let rules = RequestRules {
            trusted_proxies: Networks::parse(&["192.0.2.0/24".into()]).expect("net"),
            ..RequestRules::default()
        };
        let request = http::Request::get("/p")
            .header("host", "internal:8080")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "shop.example")
            .header("x-forwarded-for", "203.0.113.5")
            .body(())
            .expect("r");
        let (parts, ()) = request.into_parts();
        let (ctx, _) = RequestContext::parse(parts, "192.0.2.9:1".parse().expect("addr"), &rules).expect("valid");
        assert_eq!(ctx.key, "GET:https://shop.example/p");
        assert!(ctx.headers.contains_key("x-forwarded-for"), "a trusted chain is kept");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Hostile heads never panic the parser, and whatever it accepts is normalised: a plain authority, a target
        /// that is a path, a key made of them.
        #[test]
        fn hostile_heads_are_refused_or_normalised(
            method in "(GET|HEAD|POST|PURGE|OPTIONS|CONNECT|[A-Z]{1,8})",
            target in "(/|\\*|http://[a-z.]{0,12}(:[0-9]{0,6})?/?)[ -~]{0,40}",
            headers in proptest::collection::vec(("(host|connection|x-forwarded-host|forwarded|transfer-encoding|content-length|cookie|[a-z-]{1,12})", "[ -~]{0,30}"), 0..8),
        ) {
            let Ok(uri) = target.parse::<http::Uri>() else { return Ok(()) };
            let Ok(method) = Method::from_bytes(method.as_bytes()) else { return Ok(()) };
            let mut request = http::Request::builder().method(method).uri(uri);
            for (name, value) in &headers {
                if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
                    request = request.header(name, value);
                }
            }
            let Ok(request) = request.body(()) else { return Ok(()) };
            if let Ok((ctx, _)) = parse(request) {
                proptest::prop_assert!(valid_authority(&ctx.authority), "{}", ctx.authority);
                proptest::prop_assert!(ctx.target.starts_with('/') || ctx.target == "*");
                proptest::prop_assert!(ctx.key.starts_with("GET:http://") || ctx.key.starts_with("GET:https://"));
                proptest::prop_assert_eq!(ctx.headers.get_all(HOST).iter().count(), 1);
            }
        }
    }
}
