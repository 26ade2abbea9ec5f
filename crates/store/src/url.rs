//! Store URLs (spec/STORES.md §1): one string names a store the same way in every language, in
//! `larder serve --store` and in `larder store …`. `scheme://[user[:password]@]host[:port][,host[:port]…][/path][?options]`.
//! Each backend takes the options it knows; any option left over is an error that names it and lists the known
//! ones, so a typo never silently falls back to a default.

use std::collections::BTreeSet;
use std::time::Duration;

use percent_encoding::percent_decode_str;

/// A store URL that could not be used, with the reason. The password, if any, is never shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("store URL {url:?}: {message}")]
pub struct UrlError {
    pub url: String,
    pub message: String,
}

/// One `host[:port]` of a URL's host list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// Without brackets for an IPv6 address.
    pub host: String,
    pub port: Option<u16>,
}

impl HostPort {
    /// `host:port` as a socket address string (brackets around IPv6), with `default_port` when none was given.
    pub fn address(&self, default_port: u16) -> String {
        let port = self.port.unwrap_or(default_port);
        if self.host.contains(':') {
            format!("[{}]:{port}", self.host)
        } else {
            format!("{}:{port}", self.host)
        }
    }
}

/// A parsed store URL. Take the options a backend knows with the `take_*` methods, then call
/// [`StoreUrl::finish`].
#[derive(Debug, Clone)]
pub struct StoreUrl {
    /// Lowercase: `memory`, `memcached`, `redis`, `redis+cluster`, `sqlite`, `postgres`, `file`.
    pub scheme: String,
    pub username: Option<String>,
    pub password: Option<String>,
    /// The comma-separated host list (empty for `memory`, `sqlite`, `file`).
    pub hosts: Vec<HostPort>,
    /// Percent-decoded path after the hosts, with its leading `/` ("" when there is none).
    pub path: String,
    options: Vec<(String, String)>,
    known: BTreeSet<&'static str>,
    shown: String,
}

impl StoreUrl {
    pub fn parse(url: &str) -> Result<StoreUrl, UrlError> {
        let shown = redact(url);
        let fail = |message: String| UrlError { url: shown.clone(), message };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| {
            fail("not a store URL: expected scheme://… (for example memcached://127.0.0.1:11211)".into())
        })?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+') {
            return Err(fail(format!("{scheme:?} is not a URL scheme")));
        }
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        if rest.contains('#') || query.contains('#') {
            return Err(fail("a store URL has no fragment (#)".into()));
        }
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        let (userinfo, host_list) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (user, pass) = match info.split_once(':') {
                    Some((user, pass)) => (user, Some(pass)),
                    None => (info, None),
                };
                let user = decode(user).map_err(&fail)?;
                let pass = pass.map(decode).transpose().map_err(&fail)?;
                ((!user.is_empty()).then_some(user), pass)
            }
        };
        let mut hosts = Vec::new();
        if !host_list.is_empty() {
            for part in host_list.split(',') {
                hosts.push(parse_host(part).map_err(&fail)?);
            }
        }
        let path = decode(path).map_err(&fail)?;
        let mut options: Vec<(String, String)> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode(name).map_err(&fail)?;
            let value = decode(value).map_err(&fail)?;
            if options.iter().any(|(n, _)| *n == name) {
                return Err(fail(format!("option {name:?} is given twice")));
            }
            options.push((name, value));
        }
        Ok(StoreUrl { scheme, username, password, hosts, path, options, known: BTreeSet::new(), shown })
    }

    /// The URL as errors show it (the password replaced by `***`).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// An error about this URL.
    pub fn error(&self, message: impl Into<String>) -> UrlError {
        UrlError { url: self.shown.clone(), message: message.into() }
    }

    /// Takes option `name` as text.
    pub fn take(&mut self, name: &'static str) -> Option<String> {
        self.known.insert(name);
        let at = self.options.iter().position(|(n, _)| n == name)?;
        Some(self.options.remove(at).1)
    }

    /// A duration: a bare number of milliseconds, or a number with exactly one of the units `ms`, `s`, `m`, `h`
    /// (spec/STORES.md §1; every language accepts exactly these, so one URL means the same everywhere).
    pub fn take_duration(&mut self, name: &'static str, default: Duration) -> Result<Duration, UrlError> {
        let Some(text) = self.take(name) else { return Ok(default) };
        parse_duration(&text, 1).ok_or_else(|| {
            self.error(format!("option {name}={text:?} is not a duration (a number with ms, s, m or h)"))
        })
    }

    /// A byte size such as `256M` or `10G` (see [`crate::parse_size`]).
    pub fn take_size(&mut self, name: &'static str, default: u64) -> Result<u64, UrlError> {
        match self.take(name) {
            None => Ok(default),
            Some(text) => crate::parse_size(&text).map_err(|e| self.error(format!("option {name}: {e}"))),
        }
    }

    /// A whole number within `range`.
    pub fn take_number(
        &mut self,
        name: &'static str,
        default: u64,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64, UrlError> {
        match self.take(name) {
            None => Ok(default),
            Some(text) => match text.parse::<u64>() {
                Ok(n) if range.contains(&n) => Ok(n),
                _ => Err(self.error(format!(
                    "option {name}={text:?} must be a whole number from {} to {}",
                    range.start(),
                    range.end()
                ))),
            },
        }
    }

    /// `true`/`false` (also `1`/`0`, `yes`/`no`).
    pub fn take_bool(&mut self, name: &'static str, default: bool) -> Result<bool, UrlError> {
        match self.take(name).as_deref() {
            None => Ok(default),
            Some("true" | "1" | "yes") => Ok(true),
            Some("false" | "0" | "no") => Ok(false),
            Some(other) => Err(self.error(format!("option {name}={other:?} must be true or false"))),
        }
    }

    /// Refuses options no backend took, naming the known ones. Call after taking every option.
    pub fn finish(&self) -> Result<(), UrlError> {
        if self.options.is_empty() {
            return Ok(());
        }
        let unknown: Vec<&str> = self.options.iter().map(|(n, _)| n.as_str()).collect();
        let known: Vec<&str> = self.known.iter().copied().collect();
        Err(self.error(format!(
            "unknown option{} {} for {}:// (known: {})",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join(", "),
            self.scheme,
            if known.is_empty() { "none".to_owned() } else { known.join(", ") }
        )))
    }

    /// Refuses a host list (for stores that are a path).
    pub fn no_hosts(&self) -> Result<(), UrlError> {
        if self.hosts.is_empty() && self.username.is_none() {
            Ok(())
        } else {
            Err(self.error(format!("{}:// takes a path, not a host (write {}:///path)", self.scheme, self.scheme)))
        }
    }

    /// Requires at least one host.
    pub fn require_hosts(&self) -> Result<&[HostPort], UrlError> {
        if self.hosts.is_empty() {
            Err(self.error(format!("{}:// needs at least one host", self.scheme)))
        } else {
            Ok(&self.hosts)
        }
    }
}

fn decode(text: &str) -> Result<String, String> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("{text:?} is not UTF-8 once decoded"))
}

fn parse_host(part: &str) -> Result<HostPort, String> {
    let invalid = || format!("{part:?} is not host[:port]");
    let (host, port) = if let Some(rest) = part.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(invalid)?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or_else(invalid)?)),
        }
    } else {
        match part.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, Some(port)),
            Some(_) => return Err(format!("{part:?}: write an IPv6 address in brackets, [::1]:11211")),
            None => (part, None),
        }
    };
    if host.is_empty() || host.bytes().any(|b| b.is_ascii_whitespace() || b"/?#@".contains(&b)) {
        return Err(invalid());
    }
    let port = match port {
        None => None,
        Some(p) => {
            Some(p.parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(|| format!("{part:?}: port must be 1-65535"))?)
        }
    };
    Ok(HostPort { host: host.to_owned(), port })
}

/// The URL with any password replaced, for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) if userinfo.contains(':') => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}:***@{hosts}{}", &rest[authority_end..])
        }
        _ => url.to_owned(),
    }
}

/// `250`, `250ms`, `2s`, `1m`, `1h`: digits, then at most one unit; nothing else.
/// A duration as spec/STORES.md §1 writes them: 1 to 12 digits, then nothing or exactly one of `ms`, `s`, `m`, `h`.
/// A bare number counts `bare_ms` milliseconds per unit (1 in store URLs, 1,000 for the front's `_secs` settings).
pub fn parse_duration(text: &str, bare_ms: u64) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() || digits.len() > 12 {
        return None;
    }
    let number: u64 = digits.parse().ok()?;
    let ms_per_unit = match unit {
        "" => bare_ms,
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    Some(Duration::from_millis(number.checked_mul(ms_per_unit)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_shape_the_spec_lists() {
        let url = StoreUrl::parse("memcached://h1:11211,h2:11212,[::1]:11213?timeout=100ms").unwrap();
        assert_eq!(url.scheme, "memcached");
        assert_eq!(url.hosts.len(), 3);
        assert_eq!(url.hosts[2], HostPort { host: "::1".into(), port: Some(11213) });
        assert_eq!(url.hosts[2].address(1), "[::1]:11213");

        let mut url = StoreUrl::parse("redis://user:p%40ss@cache.local:6380/2?pool=4").unwrap();
        assert_eq!((url.username.as_deref(), url.password.as_deref()), (Some("user"), Some("p@ss")));
        assert_eq!(url.path, "/2");
        assert_eq!(url.take_number("pool", 1, 1..=64).unwrap(), 4);
        url.finish().unwrap();
        assert!(!url.shown().contains("p%40ss"), "{}", url.shown());

        let url = StoreUrl::parse("sqlite:///var/lib/cache.db").unwrap();
        assert!(url.hosts.is_empty());
        assert_eq!(url.path, "/var/lib/cache.db");
        url.no_hosts().unwrap();

        let mut url = StoreUrl::parse("memory://?capacity=256M").unwrap();
        assert_eq!(url.take_size("capacity", 0).unwrap(), 256 << 20);
        url.finish().unwrap();
    }

    #[test]
    fn unknown_and_malformed_options_are_errors_that_say_why() {
        let mut url = StoreUrl::parse("memcached://h:1?timeot=5&timeout=10").unwrap();
        url.take_duration("timeout", Duration::ZERO).unwrap();
        let err = url.finish().unwrap_err().to_string();
        assert!(err.contains("unknown option timeot") && err.contains("known: timeout"), "{err}");

        for (text, ms) in [("250", 250), ("250ms", 250), ("2s", 2_000), ("1m", 60_000), ("1h", 3_600_000)] {
            let mut url = StoreUrl::parse(&format!("memcached://h:1?timeout={text}")).unwrap();
            assert_eq!(url.take_duration("timeout", Duration::ZERO).unwrap(), Duration::from_millis(ms), "{text}");
        }
        for bad in ["soon", "", "1min", "2d", "1s500ms", "1.5s", "-1s", "s", "1 s", "99999999999999h"] {
            let mut url = StoreUrl::parse(&format!("memcached://h:1?timeout={bad}")).unwrap();
            let error = url.take_duration("timeout", Duration::ZERO).unwrap_err().to_string();
            assert!(error.contains("not a duration"), "{bad:?}: {error}");
        }
        assert!(StoreUrl::parse("memcached://h:1?a=1&a=2").unwrap_err().message.contains("twice"));
        assert!(StoreUrl::parse("memcached://h:99999").unwrap_err().message.contains("port"));
        assert!(StoreUrl::parse("memcached://::1:11211").unwrap_err().message.contains("brackets"));
        assert!(StoreUrl::parse("localhost:11211").unwrap_err().message.contains("scheme://"));
        assert!(StoreUrl::parse("redis://a:secret@h").unwrap().no_hosts().unwrap_err().to_string().contains("***"));
    }
}
