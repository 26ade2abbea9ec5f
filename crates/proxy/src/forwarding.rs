//! Forwarding information: which client-sent fields describe where a request came from (`X-Forwarded-*`,
//! `Forwarded`, `X-Real-IP`…), whether larder believes them, and the fields larder itself sends upstream.
//!
//! An app that reflects such a field (an absolute link built from `X-Forwarded-Host`, a redirect to
//! `X-Forwarded-Proto`) would have its answer stored under a key the field is not part of, and served to everyone:
//! cache poisoning. So larder drops every such field a client sends and sets its own from what it knows, unless the
//! client is a configured trusted proxy (a TLS terminator or load balancer in front of larder). A trusted proxy's
//! `X-Forwarded-Proto` and `X-Forwarded-Host` then become the request's scheme and authority, which the cache key is
//! made of, so what larder keys on and what the app is told still agree.
//!
//! Fields that make an app route to another URL or method than the request line says (`X-Original-URL`,
//! `X-Rewrite-URL`, and on GET and HEAD the method-override fields) are dropped from every client, trusted or not:
//! the key is the request line's.

use std::net::IpAddr;
use std::str::FromStr;

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;
use ipnet::IpNet;

/// Fields through which a client describes the request's origin; believed only from trusted proxies.
pub const FORWARDING_FIELDS: &[&str] = &[
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-forwarded-scheme",
    "x-forwarded-server",
    "x-forwarded-ssl",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
    "x-cluster-client-ip",
    "x-original-host",
    "x-host",
    "front-end-https",
];

/// Fields that reroute a request inside common frameworks (IIS, Symfony, Laravel); never forwarded.
pub const REROUTING_FIELDS: &[&str] = &["x-original-url", "x-rewrite-url"];

/// Fields that change the method inside common frameworks; never forwarded with GET or HEAD, whose responses are
/// shared.
pub const METHOD_OVERRIDE_FIELDS: &[&str] = &["x-http-method-override", "x-http-method", "x-method-override"];

/// The fields larder sets on every upstream request.
pub const SET_BY_LARDER: &[&str] = &["x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "forwarded"];

/// A set of client addresses and networks: the proxies whose forwarding fields are believed, the clients that
/// may send `PURGE`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Networks(Vec<IpNet>);

impl Networks {
    /// Parses addresses (`10.0.0.7`) and networks (`10.0.0.0/8`, `fd00::/8`).
    pub fn parse(entries: &[String]) -> Result<Networks, String> {
        let mut nets = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = entry.trim();
            let net = match IpNet::from_str(entry) {
                Ok(net) => net,
                Err(_) => IpAddr::from_str(entry)
                    .map(IpNet::from)
                    .map_err(|_| format!("{entry:?} is not an IP address or a network such as 10.0.0.0/8"))?,
            };
            nets.push(net);
        }
        Ok(Networks(nets))
    }

    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|net| net.contains(&addr))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether a header is one of the forwarding, rerouting or method-override fields (a quick test for the request
/// parser, which then looks closer).
pub fn is_forwarding_related(name: &HeaderName) -> bool {
    let name = name.as_str();
    (name.starts_with("x-") || name == "forwarded" || name == "true-client-ip" || name == "front-end-https")
        && (FORWARDING_FIELDS.contains(&name)
            || REROUTING_FIELDS.contains(&name)
            || METHOD_OVERRIDE_FIELDS.contains(&name))
}

/// What a trusted proxy says about the original request: the scheme and host it received.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Claimed {
    pub proto: Option<String>,
    pub host: Option<String>,
}

/// Reads a trusted proxy's claims. `X-Forwarded-Proto` / `X-Forwarded-Host` (first list element) and the first
/// element of `Forwarded` must agree where both speak; a disagreement is ambiguous, so an error.
pub fn claimed(headers: &HeaderMap) -> Result<Claimed, &'static str> {
    let first_element = |name: &str| -> Result<Option<String>, &'static str> {
        let mut values = headers.get_all(name).iter();
        let Some(value) = values.next() else { return Ok(None) };
        let text = value.to_str().map_err(|_| "a forwarding field is not ASCII")?;
        Ok(text.split(',').next().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()))
    };
    let mut claimed = Claimed { proto: first_element("x-forwarded-proto")?, host: first_element("x-forwarded-host")? };
    if let Some(forwarded) = headers.get("forwarded") {
        let text = forwarded.to_str().map_err(|_| "Forwarded is not ASCII")?;
        let first = text.split(',').next().unwrap_or("");
        for pair in first.split(';') {
            let Some((name, value)) = pair.split_once('=') else { continue };
            let value = value.trim().trim_matches('"').to_owned();
            let slot = match name.trim().to_ascii_lowercase().as_str() {
                "proto" => &mut claimed.proto,
                "host" => &mut claimed.host,
                _ => continue,
            };
            match slot {
                Some(existing) if !existing.eq_ignore_ascii_case(&value) => {
                    return Err("Forwarded and X-Forwarded-* disagree about the original request");
                }
                _ => *slot = Some(value),
            }
        }
    }
    if let Some(proto) = &mut claimed.proto {
        proto.make_ascii_lowercase();
        if proto != "http" && proto != "https" {
            return Err("the forwarded protocol is neither http nor https");
        }
    }
    Ok(claimed)
}

/// Adds larder's forwarding fields to an upstream request: the client's address appended to `X-Forwarded-For`
/// and `Forwarded` (which hold a trusted proxy's chain, or nothing), and the scheme and host larder keyed on.
pub fn add_forwarding(headers: &mut HeaderMap, client: IpAddr, scheme: &str, authority: &str) {
    let append = |headers: &mut HeaderMap, name: &'static str, element: String| {
        let joined = match headers.get(name).and_then(|v| v.to_str().ok()) {
            Some(prior) if !prior.trim().is_empty() => format!("{prior}, {element}"),
            _ => element,
        };
        if let Ok(value) = HeaderValue::from_str(&joined) {
            headers.insert(name, value);
        }
    };
    append(headers, "x-forwarded-for", client.to_string());
    let node = match client {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("\"[{v6}]\""),
    };
    append(headers, "forwarded", format!("for={node};host={};proto={scheme}", quoted_if_needed(authority)));
    if let Ok(host) = HeaderValue::from_str(authority) {
        headers.insert("x-forwarded-host", host);
    }
    headers.insert("x-forwarded-proto", HeaderValue::from_static(if scheme == "https" { "https" } else { "http" }));
}

/// RFC 7239 §4: a value that is not a token (a host with a port has `:`, an IPv6 literal `[`) is quoted.
fn quoted_if_needed(value: &str) -> String {
    if value.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
        value.to_owned()
    } else {
        format!("\"{value}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc9111::test_headers as map;

    #[test]
    fn trusted_networks_and_addresses() {
        let trusted = Networks::parse(&["10.0.0.0/8".into(), "::1".into()]).expect("parses");
        assert!(trusted.contains("10.1.2.3".parse().expect("ip")));
        assert!(trusted.contains("::ffff:10.1.2.3".parse().expect("ip")), "IPv4-mapped addresses count as IPv4");
        assert!(trusted.contains("::1".parse().expect("ip")));
        assert!(!trusted.contains("127.0.0.1".parse().expect("ip")));
        assert!(Networks::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(Networks::parse(&["proxy.example".into()]).is_err());
    }

    #[test]
    fn claims_must_agree() {
        let both = map(&[("x-forwarded-proto", "https"), ("forwarded", "for=1.2.3.4;proto=https;host=a.example")]);
        assert_eq!(
            claimed(&both),
            Ok(Claimed { proto: Some("https".into()), host: Some("a.example".into()) }),
            "Forwarded fills in what X-Forwarded-* does not say"
        );
        let disagree = map(&[("x-forwarded-host", "a.example"), ("forwarded", "host=b.example")]);
        assert!(claimed(&disagree).is_err());
        assert!(claimed(&map(&[("x-forwarded-proto", "gopher")])).is_err());
        assert_eq!(claimed(&map(&[("x-forwarded-proto", "HTTPS, http")])).map(|c| c.proto), Ok(Some("https".into())));
    }

    #[test]
    fn larder_appends_to_chains_and_sets_scheme_and_host() {
        let mut h = map(&[("x-forwarded-for", "203.0.113.9")]);
        add_forwarding(&mut h, "10.0.0.7".parse().expect("ip"), "https", "shop.example:8443");
        assert_eq!(h.get("x-forwarded-for").and_then(|v| v.to_str().ok()), Some("203.0.113.9, 10.0.0.7"));
        assert_eq!(
            h.get("forwarded").and_then(|v| v.to_str().ok()),
            Some("for=10.0.0.7;host=\"shop.example:8443\";proto=https")
        );
        assert_eq!(h.get("x-forwarded-proto").and_then(|v| v.to_str().ok()), Some("https"));
        let mut v6 = HeaderMap::new();
        add_forwarding(&mut v6, "::1".parse().expect("ip"), "http", "a");
        assert_eq!(v6.get("forwarded").and_then(|v| v.to_str().ok()), Some("for=\"[::1]\";host=a;proto=http"));
    }
}
