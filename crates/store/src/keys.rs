//! The keys a store writes (spec/STORES.md §2): a caller's key under the store's `prefix` option, and the store's
//! own bookkeeping keys (locks, purge records, tag indexes), which no caller's key can collide with.

use std::borrow::Cow;

use larder_format::key::safe_key;

/// The key as the server sees it: `safe_key(prefix + key)`, or `key` itself without a prefix (callers' keys are
/// already safe).
pub fn stored_key<'a>(prefix: &str, key: &'a str) -> Cow<'a, str> {
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
    stored_key(prefix, &own).into_owned()
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
        assert_eq!(stored_key("", "a:b"), "a:b");
        assert_eq!(stored_key("app1/", "a:b"), "app1/a:b");
        let tag = internal_key("", "tag", "product:1");
        assert!(tag.starts_with("larder#") && tag.len() == 7 + 64, "{tag}");
        assert_ne!(internal_key("", "tag", "x"), internal_key("", "prefix", "x"));
        assert!(internal_key("p:", "lock", "k").starts_with("p:larder#"));
    }
}

#[cfg(test)]
mod vectors {
    use super::*;

    #[test]
    fn every_case_of_spec_vectors_stores_json() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/vectors/stores.json");
        let text = std::fs::read_to_string(path).expect("spec/vectors/stores.json");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let cases = doc["cases"].as_array().expect("cases");
        assert!(cases.len() >= 10);
        for case in cases {
            let text = |field: &str| case[field].as_str().expect(field).to_owned();
            let got = match case["kind"].as_str() {
                Some("stored") => stored_key(&text("prefix"), &text("key")).into_owned(),
                Some("internal") => internal_key(&text("prefix"), &text("purpose"), &text("name")),
                other => panic!("unknown kind {other:?}"),
            };
            assert_eq!(got, text("stored_key"), "{case}");
        }
    }
}
