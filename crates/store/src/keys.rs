//! The keys a store writes (spec/STORES.md §2): a caller's key under the store's `prefix` option, and the store's
//! own bookkeeping keys (locks, purge records, tag indexes), which no caller's key can collide with.

use std::borrow::Cow;

use larder_format::key::{safe_key, MAX_KEY_LEN};

use crate::StoreError;

/// Why `key` may not reach a store, if it may not (spec/STORES.md §2): a caller's key is a non-empty safe key, so
/// none of its bytes can become protocol (a CR LF in a memcached key would be a second command).
pub fn key_problem(key: &str) -> Option<&'static str> {
    if key.is_empty() {
        Some("a key may not be empty")
    } else {
        prefix_problem(key)
    }
}

/// Why `prefix` may not be purged, if it may not: the rule of keys, but the empty prefix (everything) is allowed.
pub fn prefix_problem(prefix: &str) -> Option<&'static str> {
    let bytes = prefix.as_bytes();
    if bytes.len() > MAX_KEY_LEN {
        Some("longer than 250 bytes (apply safe_key, spec/FORMAT.md §5.1)")
    } else if bytes.iter().any(|b| *b <= 0x20 || *b == 0x7f) {
        Some("holds a space or control byte (apply safe_key, spec/FORMAT.md §5.1)")
    } else {
        None
    }
}

/// `Ok` for a key a store may take, else the `invalid_key` error naming `backend`.
pub fn check_key(backend: &'static str, key: &str) -> Result<(), StoreError> {
    key_problem(key).map_or(Ok(()), |reason| Err(invalid(backend, key, reason)))
}

/// `Ok` for a prefix a store may purge, else the `invalid_key` error naming `backend`.
pub fn check_prefix(backend: &'static str, prefix: &str) -> Result<(), StoreError> {
    prefix_problem(prefix).map_or(Ok(()), |reason| Err(invalid(backend, prefix, reason)))
}

fn invalid(backend: &'static str, key: &str, reason: &'static str) -> StoreError {
    let shown: String = key.chars().take(80).collect::<String>().escape_debug().collect();
    let ellipsis = if key.chars().nth(80).is_some() { "…" } else { "" };
    StoreError::InvalidKey { backend, key: format!("\"{shown}\"{ellipsis}"), reason }
}

/// The key as the server sees it: `safe_key(prefix + key)`, or `key` itself without a prefix, once `key` is known
/// to be one a store may take.
pub fn stored_key<'a>(backend: &'static str, prefix: &str, key: &'a str) -> Result<Cow<'a, str>, StoreError> {
    check_key(backend, key)?;
    Ok(prefixed(prefix, key))
}

/// The stored form of a purge prefix (`prefix + purge_prefix`), once `purge_prefix` is known to be one a store may
/// purge.
pub fn stored_prefix<'a>(
    backend: &'static str,
    prefix: &str,
    purge_prefix: &'a str,
) -> Result<Cow<'a, str>, StoreError> {
    check_prefix(backend, purge_prefix)?;
    Ok(prefixed(prefix, purge_prefix))
}

/// `prefix + key` made safe; `key` is known to be safe (checked, or larder's own).
fn prefixed<'a>(prefix: &str, key: &'a str) -> Cow<'a, str> {
    if prefix.is_empty() {
        Cow::Borrowed(key)
    } else {
        Cow::Owned(safe_key(&format!("{prefix}{key}")))
    }
}

/// A bookkeeping key: `stored_key(prefix, safe_key("larder" + NUL + purpose + ":" + name))`. The NUL makes
/// `safe_key` hash it, so it reads `larder#<sha256>` and equals no caller's key that is not this very string.
pub fn internal_key(prefix: &str, purpose: &str, name: &str) -> String {
    let own = safe_key(&format!("larder\u{0}{purpose}:{name}"));
    prefixed(prefix, &own).into_owned()
}

/// The lock guarding `key` (already a store key): taken with `add`, released with `delete_if`.
pub fn lock_key(prefix: &str, key: &str) -> String {
    internal_key(prefix, "lock", key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookkeeping_keys_are_hashed_and_prefixed() {
        assert_eq!(stored_key("test", "", "a:b").expect("safe"), "a:b");
        assert_eq!(stored_key("test", "app1/", "a:b").expect("safe"), "app1/a:b");
        let tag = internal_key("", "tag", "product:1");
        assert!(tag.starts_with("larder#") && tag.len() == 7 + 64, "{tag}");
        assert_ne!(internal_key("", "tag", "x"), internal_key("", "prefix", "x"));
        assert!(internal_key("p:", "lock", "k").starts_with("p:larder#"));
    }
}
