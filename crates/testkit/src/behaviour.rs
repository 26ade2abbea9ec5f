//! The behaviour every store must show (spec/STORES.md §2–§3), written once and run against each backend: the
//! store matrix. Each check uses keys under a fresh random run prefix, so several checks (and several stores on one
//! server) never see each other's keys. Checks panic with a message naming the store and what differed.

use std::time::Duration;

use larder_format::{encode_value, EncodeOptions, EntryMeta};
use larder_store::{Store, StoreError};

/// A key prefix no other run uses.
pub fn run_prefix(label: &str) -> String {
    format!("t{:016x}:{label}:", fastrand::u64(..))
}

/// A value entry holding `text`, created now, with the given expiry and tags.
pub fn entry(text: &str, expires_in_ms: Option<u64>, stale_ms: u64, tags: &[&str]) -> Vec<u8> {
    let now = larder_format::now_ms();
    let meta = EntryMeta {
        created_at: now,
        expires_at: expires_in_ms.map_or(0, |ms| now + ms),
        stale_ms,
        version: None,
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
    };
    encode_value(text, &meta, &EncodeOptions::default()).unwrap_or_default()
}

/// Every check but the destructive `clear` and the slow expiry check.
pub async fn check_all<S: Store>(store: &S) {
    basics(store).await;
    many(store).await;
    add_and_locks(store).await;
    counters(store).await;
    purges(store).await;
    too_large(store).await;
    hostile_keys(store).await;
    store.stats().await.unwrap_or_else(|e| panic!("{}: stats: {e}", store.backend()));
}

/// get, set, overwrite, delete of values of every size class.
pub async fn basics<S: Store>(store: &S) {
    let name = store.backend();
    let p = run_prefix("basics");
    let key = format!("{p}k");
    assert_eq!(store.get(&key).await.expect("get"), None, "{name}: a fresh key is missing");
    for value in [Vec::new(), b"v1".to_vec(), (0..=255u8).collect::<Vec<u8>>(), vec![7u8; 100 * 1024]] {
        store.set(&key, &value, None).await.unwrap_or_else(|e| panic!("{name}: set {} bytes: {e}", value.len()));
        let got = store
            .get(&key)
            .await
            .expect("get")
            .unwrap_or_else(|| panic!("{name}: {} bytes written, none read", value.len()));
        assert!(*got == *value, "{name}: read back {} bytes, wrote {}", got.len(), value.len());
    }
    let entry = entry("hello", Some(60_000), 0, &[]);
    store.set(&key, &entry, None).await.expect("set entry");
    assert_eq!(
        store.get(&key).await.expect("get").as_deref(),
        Some(&entry[..]),
        "{name}: entries are stored byte for byte"
    );
    assert!(store.delete(&key).await.expect("delete"), "{name}: delete of a present key says so");
    assert!(!store.delete(&key).await.expect("delete"), "{name}: delete of a missing key says so");
    assert_eq!(store.get(&key).await.expect("get"), None, "{name}: deleted");
    // An entry already past its hard expiry stores nothing (and removes the older value).
    store.set(&key, b"old", None).await.expect("set");
    let past = {
        let meta = EntryMeta { created_at: 1, expires_at: 2, ..EntryMeta::default() };
        encode_value("gone", &meta, &EncodeOptions::default()).unwrap_or_default()
    };
    store.set(&key, &past, None).await.expect("set of an expired entry is not an error");
    assert_eq!(store.get(&key).await.expect("get"), None, "{name}: an expired entry is never returned");
    assert!(!store.add(&key, &past, None).await.expect("add"), "{name}: an add of an expired entry adds nothing");
    assert_eq!(store.get(&key).await.expect("get"), None, "{name}: nothing was added");
}

/// get_many keeps order and answers misses; set_many and delete_many.
pub async fn many<S: Store>(store: &S) {
    let name = store.backend();
    let p = run_prefix("many");
    let keys: Vec<String> = (0..120).map(|i| format!("{p}{i}")).collect();
    let values: Vec<Vec<u8>> = (0..120).map(|i| format!("value-{i}").into_bytes()).collect();
    let items: Vec<(&str, &[u8])> =
        keys.iter().zip(&values).filter(|(k, _)| !k.ends_with('7')).map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    store.set_many(&items, None).await.unwrap_or_else(|e| panic!("{name}: set_many: {e}"));
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got = store.get_many(&refs).await.unwrap_or_else(|e| panic!("{name}: get_many: {e}"));
    assert_eq!(got.len(), keys.len(), "{name}: one answer per key");
    for ((key, value), answer) in keys.iter().zip(&values).zip(&got) {
        if key.ends_with('7') {
            assert_eq!(answer, &None, "{name}: {key} was never written");
        } else {
            assert_eq!(answer.as_deref(), Some(value.as_slice()), "{name}: {key} in its place");
        }
    }
    let twice = store.get_many(&[refs[0], refs[0], refs[7]]).await.expect("get_many");
    assert_eq!(
        (twice[0].is_some(), twice[1].is_some(), twice[2].is_some()),
        (true, true, false),
        "{name}: repeated keys"
    );
    assert_eq!(store.get_many(&[]).await.expect("empty get_many").len(), 0);
    let deleted = store.delete_many(&refs[..20]).await.expect("delete_many");
    assert_eq!(deleted, 18, "{name}: delete_many counts the present keys (2 of 20 were never written)");
    assert_eq!(store.get(refs[1]).await.expect("get"), None);
    assert!(store.get(refs[20]).await.expect("get").is_some(), "{name}: keys outside delete_many stay");
}

/// add stores only when absent; a lock taken with add is released only by its token.
pub async fn add_and_locks<S: Store>(store: &S) {
    let name = store.backend();
    let p = run_prefix("add");
    let key = format!("{p}lock");
    assert!(
        store.add(&key, b"token-a", Some(Duration::from_secs(30))).await.expect("add"),
        "{name}: add to a free key"
    );
    assert!(
        !store.add(&key, b"token-b", Some(Duration::from_secs(30))).await.expect("add"),
        "{name}: add to a taken key"
    );
    assert_eq!(
        store.get(&key).await.expect("get").as_deref(),
        Some(&b"token-a"[..]),
        "{name}: add kept the first value"
    );
    assert!(!store.delete_if(&key, b"token-b").await.expect("delete_if"), "{name}: the wrong token releases nothing");
    assert!(store.get(&key).await.expect("get").is_some(), "{name}: still held");
    assert!(store.delete_if(&key, b"token-a").await.expect("delete_if"), "{name}: the holder releases");
    assert_eq!(store.get(&key).await.expect("get"), None);
    assert!(!store.delete_if(&key, b"token-a").await.expect("delete_if"), "{name}: nothing left to release");
    assert!(store.add(&key, b"token-c", None).await.expect("add"), "{name}: free again");
}

/// Counters: ASCII decimal, created on demand, refused on values that are not counters.
pub async fn counters<S: Store>(store: &S) {
    let name = store.backend();
    let p = run_prefix("counters");
    let key = format!("{p}hits");
    assert_eq!(store.incr(&key, 1, None, false).await.expect("incr"), None, "{name}: no create, no counter");
    assert_eq!(store.get(&key).await.expect("get"), None, "{name}: and nothing written");
    assert_eq!(store.incr(&key, 5, Some(Duration::from_secs(60)), true).await.expect("incr"), Some(5));
    assert_eq!(store.incr(&key, 10, None, true).await.expect("incr"), Some(15));
    assert_eq!(store.incr(&key, -3, None, true).await.expect("decr"), Some(12));
    assert_eq!(store.get(&key).await.expect("get").as_deref(), Some(&b"12"[..]), "{name}: stored as ASCII decimal");
    store.set(&key, b"40", None).await.expect("set");
    assert_eq!(store.incr(&key, 2, None, false).await.expect("incr"), Some(42), "{name}: a counter written by set");
    let text = format!("{p}text");
    store.set(&text, b"forty", None).await.expect("set");
    match store.incr(&text, 1, None, true).await {
        Err(StoreError::NotACounter { .. }) => {}
        other => panic!("{name}: incr of text must be not_a_counter, got {other:?}"),
    }
    assert_eq!(store.get(&text).await.expect("get").as_deref(), Some(&b"forty"[..]), "{name}: left as it was");
}

/// Purge by tag and by prefix, seen by the same store at once.
pub async fn purges<S: Store>(store: &S) {
    purges_across(store, store).await;
}

/// Purges made through `purger` are seen by `reader` (another process's handle on the same store) at once.
pub async fn purges_across<S: Store, R: Store>(purger: &S, reader: &R) {
    let name = purger.backend();
    let p = run_prefix("purge");
    let tag = format!("{p}tag-b");
    let both = entry("ab", Some(60_000), 0, &[&format!("{p}tag-a"), &tag]);
    let only_b = entry("b", None, 0, &[&tag]);
    let other = entry("c", Some(60_000), 0, &[&format!("{p}tag-c")]);
    let plain = entry("plain", Some(60_000), 0, &[]);
    for (key, value) in [("ab", &both), ("b", &only_b), ("c", &other), ("plain", &plain)] {
        reader.set(&format!("{p}{key}"), value, None).await.expect("set");
    }
    purger.purge_tag(&tag).await.unwrap_or_else(|e| panic!("{name}: purge_tag: {e}"));
    let got = |key: &str| {
        let key = format!("{p}{key}");
        async move { reader.get(&key).await.expect("get") }
    };
    assert_eq!(got("ab").await, None, "{name}: an entry with the purged tag among others is gone");
    assert_eq!(got("b").await, None, "{name}: an entry with only the purged tag is gone");
    assert!(got("c").await.is_some(), "{name}: another tag stays");
    assert!(got("plain").await.is_some(), "{name}: untagged stays");

    for key in ["x/1", "x/2", "x/deeper/3", "y/1", "x"] {
        reader.set(&format!("{p}{key}"), &entry(key, Some(60_000), 0, &[]), None).await.expect("set");
    }
    purger.purge_prefix(&format!("{p}x/")).await.unwrap_or_else(|e| panic!("{name}: purge_prefix: {e}"));
    for key in ["x/1", "x/2", "x/deeper/3"] {
        assert_eq!(got(key).await, None, "{name}: {key} is under the purged prefix");
    }
    assert!(got("y/1").await.is_some(), "{name}: y/1 is not under x/");
    assert!(got("x").await.is_some(), "{name}: x is not under x/");
}

/// A value larger than the store holds is refused with a typed error, and nothing is stored.
pub async fn too_large<S: Store>(store: &S) {
    let name = store.backend();
    let limit = store.max_value_bytes();
    if limit > 64 << 20 {
        return;
    }
    let key = format!("{}big", run_prefix("large"));
    // max_value_bytes holds for keys up to 250 bytes; 512 more is over it for any key.
    let size = limit + 512;
    match store.set(&key, &vec![1u8; size], None).await {
        Err(StoreError::TooLarge { size: reported, .. }) => {
            assert_eq!(reported, size, "{name}: the error gives the size")
        }
        other => panic!("{name}: a value over max_value_bytes ({limit}) must be too_large, got {other:?}"),
    }
    assert_eq!(store.get(&key).await.expect("get"), None, "{name}: nothing was stored");
}

/// Native expiry from the entry header and from a TTL (takes about 2.5 s).
pub async fn expiry<S: Store>(store: &S) {
    let name = store.backend();
    let p = run_prefix("expiry");
    store.set(&format!("{p}short"), &entry("short", Some(1_000), 0, &[]), None).await.expect("set");
    store.set(&format!("{p}stale"), &entry("stale", Some(1_000), 60_000, &[]), None).await.expect("set");
    store.set(&format!("{p}ttl"), b"raw", Some(Duration::from_millis(1_000))).await.expect("set");
    store
        .set(&format!("{p}capped"), &entry("capped", Some(60_000), 0, &[]), Some(Duration::from_millis(1_000)))
        .await
        .expect("set");
    store.set(&format!("{p}forever"), &entry("forever", None, 0, &[]), None).await.expect("set");
    for key in ["short", "stale", "ttl", "capped", "forever"] {
        assert!(store.get(&format!("{p}{key}")).await.expect("get").is_some(), "{name}: {key} readable at once");
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let after = |key: &str| {
        let key = format!("{p}{key}");
        async move { store.get(&key).await.expect("get").is_some() }
    };
    assert!(!after("short").await, "{name}: an entry past expires_at (no stale window) is gone");
    assert!(after("stale").await, "{name}: an entry inside its stale window stays");
    assert!(!after("ttl").await, "{name}: a raw value past its TTL is gone");
    assert!(!after("capped").await, "{name}: a TTL shorter than the entry's expiry wins");
    assert!(after("forever").await, "{name}: an entry that never expires stays");
}

/// `clear` empties the store (destructive: run it on a store of its own).
pub async fn clear<S: Store>(store: &S) {
    let name = store.backend();
    let p = run_prefix("clear");
    store.set(&format!("{p}a"), &entry("a", None, 0, &[]), None).await.expect("set");
    store.clear().await.unwrap_or_else(|e| panic!("{name}: clear: {e}"));
    assert_eq!(store.get(&format!("{p}a")).await.expect("get"), None, "{name}: cleared");
}

/// Keys that are not safe keys (spec/STORES.md §2) are refused by every operation with `invalid_key`, and the
/// attempt affects no other key: a sentinel written before keeps its value, and the store (the same connection,
/// for a remote one) answers correctly afterwards. The keys are the refused cases of spec/vectors/stores.json
/// (memcached commands riding on CR LF, spaces, NUL, DEL, empty, 251 bytes) and 200 random ones with at least one
/// forbidden byte, from a seed printed on failure.
pub async fn hostile_keys<S: Store>(store: &S) {
    let name = store.backend();
    let p = run_prefix("hostile");
    let sentinel = format!("{p}innocent");
    store.set(&sentinel, b"kept", None).await.expect("set");
    let seed = fastrand::u64(..);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut keys: Vec<String> = vec![
        format!("{p}z\r\nms {p}innocent 6 T0\r\nHIJACK\r\nmg {p}innocent v"),
        format!("{p}a b"),
        format!("{p}a\u{0}b"),
        format!("{p}a\u{7f}b"),
        format!("{p}\n"),
        String::new(),
        "k".repeat(251),
    ];
    for _ in 0..200 {
        let length = rng.usize(1..300);
        let mut key: String = (0..length).map(|_| char::from(rng.u8(0x00..0x80))).collect();
        if key.len() <= 250 && key.bytes().all(|b| b > 0x20 && b != 0x7f) {
            key.push(' ');
        }
        keys.push(key);
    }
    for key in &keys {
        let refused = |what: &str, result: Result<(), StoreError>| match result {
            Err(StoreError::InvalidKey { .. }) => {}
            other => panic!("{name}: {what} of {key:?} (seed {seed}) must be invalid_key, got {other:?}"),
        };
        refused("get", store.get(key).await.map(|_| ()));
        refused("get_many", store.get_many(&[&sentinel, key]).await.map(|_| ()));
        refused("set", store.set(key, b"HIJACK", None).await);
        refused("add", store.add(key, b"HIJACK", None).await.map(|_| ()));
        refused("incr", store.incr(key, 1, None, true).await.map(|_| ()));
        refused("delete", store.delete(key).await.map(|_| ()));
        refused("delete_if", store.delete_if(key, b"x").await.map(|_| ()));
        refused("delete_many", store.delete_many(&[&sentinel, key]).await.map(|_| ()));
        if !key.is_empty() {
            refused("purge_prefix", store.purge_prefix(key).await.map(|_| ()));
        }
    }
    assert_eq!(
        store.get(&sentinel).await.expect("get").as_deref(),
        Some(&b"kept"[..]),
        "{name}: no refused key touched another (seed {seed})"
    );
    let after = format!("{p}after");
    store.set(&after, b"in step", None).await.expect("set after the attempts");
    assert_eq!(store.get(&after).await.expect("get").as_deref(), Some(&b"in step"[..]), "{name}: still in step");
}
