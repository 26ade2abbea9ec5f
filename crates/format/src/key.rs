//! Keys every language derives identically (spec/FORMAT.md §5): safe keys for memcached's rules, namespaces, and
//! HTTP request keys with sorted query parameters and tracking parameters dropped.

use sha2::{Digest, Sha256};

/// memcached's key length limit.
pub const MAX_KEY_LEN: usize = 250;
/// Longest readable prefix kept in a hashed key.
const HASHED_PREFIX_LEN: usize = 180;

/// Query parameters dropped from HTTP keys unless configured otherwise.
pub const DEFAULT_DROP_PARAMS: &[&str] = &["utm_*", "gclid", "fbclid", "msclkid"];

/// `key` unchanged if memcached accepts it, else its readable prefix, `#`, and the SHA-256 of the whole key.
pub fn safe_key(key: &str) -> String {
    if is_safe(key) {
        return key.to_owned();
    }
    hashed(key)
}

/// [`safe_key`] of a key the caller owns (no copy when it is already safe).
fn into_safe_key(key: String) -> String {
    if is_safe(&key) {
        key
    } else {
        hashed(&key)
    }
}

fn is_safe(key: &str) -> bool {
    let bytes = key.as_bytes();
    bytes.len() <= MAX_KEY_LEN && !bytes.iter().any(|b| *b <= 0x20 || *b == 0x7f)
}

fn hashed(key: &str) -> String {
    let bytes = key.as_bytes();
    let prefix_len = bytes.iter().take(HASHED_PREFIX_LEN).take_while(|b| (0x21..=0x7e).contains(*b)).count();
    let mut out = String::with_capacity(prefix_len + 1 + 64);
    // The prefix is printable ASCII, so it ends on a character boundary.
    out.push_str(&key[..prefix_len]);
    out.push('#');
    out.push_str(&hex::encode(Sha256::digest(bytes)));
    out
}

/// `namespace:key` (or `key` when the namespace is empty), made safe.
pub fn namespaced_key(namespace: &str, key: &str) -> String {
    if namespace.is_empty() {
        return safe_key(key);
    }
    let mut full = String::with_capacity(namespace.len() + 1 + key.len());
    full.push_str(namespace);
    full.push(':');
    full.push_str(key);
    into_safe_key(full)
}

/// How HTTP request keys are derived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOptions {
    /// Prefix for every key (empty = none).
    pub namespace: String,
    /// Query parameter names to drop; a trailing `*` makes a prefix pattern.
    pub drop_params: Vec<String>,
}

impl Default for KeyOptions {
    fn default() -> Self {
        KeyOptions {
            namespace: String::new(),
            drop_params: DEFAULT_DROP_PARAMS.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

impl KeyOptions {
    fn drops(&self, name: &[u8]) -> bool {
        self.drop_params.iter().any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix.as_bytes()),
            None => name == pattern.as_bytes(),
        })
    }
}

/// The key of a request, from its parts as a server sees them (spec/FORMAT.md §5.3).
pub fn http_key(method: &str, scheme: &str, authority: &str, path_and_query: &str, options: &KeyOptions) -> String {
    http_key_parts(method, scheme, authority, path_and_query, options).key
}

/// A request's key and the normalised parts it is made of: what a proxy that keys on it must forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParts {
    /// The authority as keys write it (step 3).
    pub authority: String,
    /// The path and query as keys write them (steps 4 and 5).
    pub target: String,
    /// The key (steps 6 and 7).
    pub key: String,
}

/// [`http_key`], returning the normalised authority and target too (each computed once).
pub fn http_key_parts(
    method: &str,
    scheme: &str,
    authority: &str,
    path_and_query: &str,
    options: &KeyOptions,
) -> KeyParts {
    let scheme = scheme.to_ascii_lowercase();
    let authority = normalize_authority(&scheme, authority);
    let target = normalized_target(path_and_query, options);
    // Steps 6 and 7 in one buffer: the namespace (§5.2), then the base key.
    let namespace = &options.namespace;
    let mut base =
        String::with_capacity(namespace.len() + 1 + method.len() + scheme.len() + authority.len() + target.len() + 4);
    if !namespace.is_empty() {
        base.push_str(namespace);
        base.push(':');
    }
    base.extend(method.chars().map(|c| c.to_ascii_uppercase()));
    base.push(':');
    base.push_str(&scheme);
    base.push_str("://");
    base.push_str(&authority);
    base.push_str(&target);
    KeyParts { authority, target, key: into_safe_key(base) }
}

/// A request target as keys see it (spec/FORMAT.md §5.3 steps 4 and 5): no fragment, `/` for an empty path, the
/// query without dropped parameters and sorted by name. A proxy forwards exactly this target, so that what it
/// keys on and what the app receives cannot differ.
pub fn normalized_target(path_and_query: &str, options: &KeyOptions) -> String {
    let without_fragment = path_and_query.split('#').next().unwrap_or_default();
    let (path, query) = match without_fragment.split_once('?') {
        Some((path, query)) => (path, query),
        None => (without_fragment, ""),
    };
    let mut target = String::with_capacity(without_fragment.len() + 1);
    target.push_str(if path.is_empty() { "/" } else { path });
    let mut parts: Vec<&str> = query
        .split('&')
        .filter(|part| !part.is_empty())
        .filter(|part| !options.drops(param_name(part).as_bytes()))
        .collect();
    parts.sort_by(|a, b| param_name(a).as_bytes().cmp(param_name(b).as_bytes()));
    if let Some((first, rest)) = parts.split_first() {
        target.push('?');
        target.push_str(first);
        for part in rest {
            target.push('&');
            target.push_str(part);
        }
    }
    target
}

/// `authority` as keys write it (spec/FORMAT.md §5.3 step 3): no userinfo, lowercase, no empty or default port.
pub fn key_authority(scheme: &str, authority: &str) -> String {
    normalize_authority(&scheme.to_ascii_lowercase(), authority)
}

/// The key of a request given as a URL text (`scheme://authority/path?query`).
pub fn url_key(method: &str, url: &str, options: &KeyOptions) -> Result<String, String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("not an absolute URL (no \"://\"): {url:?}"))?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(authority_end);
    Ok(http_key(method, scheme, authority, path_and_query, options))
}

fn param_name(part: &str) -> &str {
    part.split('=').next().unwrap_or(part)
}

fn normalize_authority(scheme: &str, authority: &str) -> String {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host).to_ascii_lowercase();
    if let Some(host) = host_port.strip_suffix(':') {
        return host.to_owned();
    }
    let default_port = match scheme {
        "http" => ":80",
        "https" => ":443",
        _ => return host_port,
    };
    match host_port.strip_suffix(default_port) {
        Some(host) => host.to_owned(),
        None => host_port,
    }
}

/// What a base key holds when responses vary (spec/FORMAT.md §5.4): the lowercase header names that select the
/// variant, sorted and without duplicates, and the generation the variant keys are made with (absent in markers of
/// older writers).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VaryMarker {
    pub vary: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
}

/// A request's header lines, as selecting values read them: every line of a header, in order, by lowercase name.
/// Implemented for ordered `(name, value)` pairs (names compared case-insensitively); a server implements it for
/// its own header map.
pub trait RequestHeaders {
    fn lines(&self, name: &str) -> Vec<&[u8]>;
}

impl<N: AsRef<str>, V: AsRef<[u8]>> RequestHeaders for [(N, V)] {
    fn lines(&self, name: &str) -> Vec<&[u8]> {
        self.iter().filter(|(n, _)| n.as_ref().eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref()).collect()
    }
}

/// The selecting values of `request` for `names` (spec/FORMAT.md §5.4): one line per name, `name:` and the values
/// of every line split on `,`, each element trimmed of spaces and tabs, joined with `,`; `name` NUL `absent` for a
/// header the request lacks, so "absent" and "empty" select different variants.
pub fn selecting_values(names: &[String], request: &(impl RequestHeaders + ?Sized)) -> String {
    let mut out = String::new();
    for name in names {
        out.push_str(name);
        let lines = request.lines(name);
        if lines.is_empty() {
            out.push_str("\u{0}absent\n");
            continue;
        }
        out.push(':');
        let mut first = true;
        for line in lines {
            for element in String::from_utf8_lossy(line).split(',') {
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(element.trim_matches([' ', '\t']));
            }
        }
        out.push('\n');
    }
    out
}

/// The key of the variant of `base_key` that `request` selects under `marker` (spec/FORMAT.md §5.4).
pub fn variant_key(base_key: &str, marker: &VaryMarker, request: &(impl RequestHeaders + ?Sized)) -> String {
    let values = selecting_values(&marker.vary, request);
    match &marker.generation {
        Some(generation) => safe_key(&format!("{base_key}\n\u{0}generation:{generation}\n{values}")),
        None => safe_key(&format!("{base_key}\n{values}")),
    }
}

/// The key under which the response stored under `entry_key` is kept in another coding (spec/FORMAT.md §5.5).
pub fn alternate_key(entry_key: &str, coding: crate::ContentEncoding) -> String {
    safe_key(&format!("{entry_key}\n\u{0}coding:{}", coding.name()))
}

/// The keys a URL purge removes: the base key (a response or a marker) and the base response's alternates.
pub fn url_keys(base_key: &str) -> Vec<String> {
    let mut keys = vec![base_key.to_owned()];
    keys.extend(crate::ContentEncoding::ALL.iter().map(|coding| alternate_key(base_key, *coding)));
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_and_empty_headers_select_different_variants() {
        let names = vec!["foo".to_owned()];
        let values = |lines: &[(&str, &str)]| selecting_values(&names, lines);
        assert_ne!(values(&[]), values(&[("foo", "")]));
        assert_eq!(values(&[("Foo", " 1 ")]), values(&[("foo", "1")]), "names compare case-insensitively");
        assert_eq!(values(&[("foo", " 1, 2 ")]), values(&[("foo", "1,2")]), "whitespace around elements");
        assert_eq!(values(&[("foo", "1"), ("foo", "2")]), values(&[("foo", "1, 2")]), "repeated lines are one list");
        assert_eq!(values(&[("foo", "a\tb")]), "foo:a\tb\n", "tabs inside an element stay");
    }
}
