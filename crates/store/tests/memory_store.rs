//! The memory store's promises: read-your-writes, expiry (on a hand-moved clock), bounds under concurrent writers,
//! refusals with reasons, purges, scan resistance, and agreement with a plain map when nothing needs evicting.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use larder_format::{encode_value, EncodeOptions, EntryMeta};
use larder_store::{DynStore, ManualClock, MemoryStore, Store, StoreError};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000;

fn store_with_clock(capacity: usize) -> (MemoryStore, Arc<ManualClock>) {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder()
        .capacity_bytes(capacity)
        .clock(clock.clone())
        .maintenance_interval(None)
        .build()
        .expect("valid config");
    (store, clock)
}

fn entry_bytes(meta: &EntryMeta, value: &str) -> Vec<u8> {
    encode_value(value, meta, &EncodeOptions::default()).expect("encodes")
}

#[test]
fn a_successful_set_is_readable_immediately_and_add_respects_live_entries() {
    let (store, _) = store_with_clock(1 << 20);
    store.set_now("k", b"one", None).expect("stored");
    assert_eq!(store.get_now("k").as_deref(), Some(&b"one"[..]));
    assert!(!store.add_now("k", b"two", None).expect("no error"), "add must not replace a live entry");
    assert_eq!(store.get_now("k").as_deref(), Some(&b"one"[..]));
    store.set_now("k", b"three", None).expect("stored");
    assert_eq!(store.get_now("k").as_deref(), Some(&b"three"[..]));
    assert!(store.delete_now("k"));
    assert!(!store.delete_now("k"));
    assert_eq!(store.get_now("k"), None);
    assert!(store.add_now("k", b"four", None).expect("no error"), "add stores into an absent key");
}

#[test]
fn store_ttl_expires_on_the_clock_and_is_never_returned_late() {
    let (store, clock) = store_with_clock(1 << 20);
    store.set_now("k", b"v", Some(Duration::from_millis(1500))).expect("stored");
    clock.advance_ms(1499);
    assert!(store.get_now("k").is_some());
    clock.advance_ms(1);
    assert_eq!(store.get_now("k"), None);
    assert_eq!(store.stats_now().expirations, 1);
    assert!(store.add_now("k", b"again", None).expect("no error"), "an expired entry does not block add");
}

#[test]
fn the_entry_header_bounds_expiry_including_its_stale_window() {
    let (store, clock) = store_with_clock(1 << 20);
    let mut meta = EntryMeta::with_ttl(T0, 10_000);
    meta.stale_ms = 5_000;
    store.set_now("page", &entry_bytes(&meta, "html"), None).expect("stored");
    // A longer store TTL does not outlive the entry's own hard expiry (expires_at + stale window).
    store.set_now("page2", &entry_bytes(&meta, "html"), Some(Duration::from_secs(3600))).expect("stored");
    clock.advance_ms(14_999);
    assert!(store.get_now("page").is_some(), "stale but within the window: still served");
    assert!(store.get_now("page2").is_some());
    clock.advance_ms(1);
    assert_eq!(store.get_now("page"), None);
    assert_eq!(store.get_now("page2"), None);
}

#[test]
fn maintenance_reclaims_expired_entries_without_reads() {
    let (store, clock) = store_with_clock(64 << 20);
    for i in 0..10_000 {
        let ttl = if i % 2 == 0 { Some(Duration::from_secs(1)) } else { None };
        store.set_now(&format!("k{i}"), b"value", ttl).expect("stored");
    }
    clock.advance_ms(1000);
    let mut reclaimed = 0;
    for _ in 0..10 {
        reclaimed += store.run_maintenance();
    }
    assert_eq!(reclaimed, 5_000);
    let stats = store.stats_now();
    assert_eq!(stats.entries, 5_000);
    assert_eq!(stats.expirations, 5_000);
    assert!(store.get_now("k1").is_some());
}

#[test]
fn oversized_values_and_keys_are_refused_with_a_reason() {
    let (store, _) = store_with_clock(1 << 20);
    let limit = store.max_entry_weight();
    assert!(limit <= (1 << 20) / 16);
    let err = store.set_now("big", &vec![0u8; limit], None).expect_err("too large");
    assert!(matches!(err, StoreError::TooLarge { size, .. } if size == limit));
    assert!(err.to_string().contains("exceeds"), "{err}");
    let long_key = "k".repeat(251);
    assert!(matches!(store.set_now(&long_key, b"v", None), Err(StoreError::InvalidKey { .. })));
    assert!(matches!(store.set_now("a\r\nb", b"v", None), Err(StoreError::InvalidKey { .. })));
    assert_eq!(store.stats_now().rejections, 3);
    assert_eq!(store.get_now("big"), None);
}

#[test]
fn the_byte_bound_holds_under_a_concurrent_write_storm() {
    let capacity = 4 << 20;
    let store = MemoryStore::builder().capacity_bytes(capacity).build().expect("valid");
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                // Together the writers push ten times the capacity through the store.
                let value = vec![t as u8; 1000];
                for i in 0..(10 * capacity / 1000 / 4) {
                    store.set_now(&format!("w{t}-{i}"), &value, None).expect("fits");
                    if i % 500 == 0 {
                        assert!(store.stats_now().bytes as usize <= capacity);
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    let stats = store.stats_now();
    assert!(stats.bytes as usize <= capacity, "{} bytes > {capacity}", stats.bytes);
    assert!(stats.bytes as usize > capacity / 2, "the store should be nearly full: {}", stats.bytes);
    assert!(stats.evictions > 0);
    assert_eq!(stats.inserts, stats.entries + stats.evictions);
}

#[test]
fn the_entry_count_bound_holds() {
    let store = MemoryStore::builder().capacity_bytes(64 << 20).max_entries(1000).build().expect("valid");
    for i in 0..5000 {
        store.set_now(&i.to_string(), b"v", None).expect("stored");
    }
    assert!(store.stats_now().entries <= 1000);
    assert!(store.stats_now().entries >= 900);
}

#[test]
fn purge_by_prefix_and_by_tag() {
    let (store, _) = store_with_clock(16 << 20);
    let mut tagged = EntryMeta::with_ttl(T0, 0);
    tagged.tags = vec!["product:1".into(), "home".into()];
    store.set_now("www:GET:https://a/p/1", &entry_bytes(&tagged, "p1"), None).expect("stored");
    store.set_now("www:GET:https://a/p/2", &entry_bytes(&EntryMeta::with_ttl(T0, 0), "p2"), None).expect("stored");
    store.set_now("api:GET:https://a/x", &entry_bytes(&tagged, "x"), None).expect("stored");
    store.set_now("raw", b"not an entry, home", None).expect("stored");
    assert_eq!(store.purge_tag_now("home"), 2);
    assert_eq!(store.get_now("www:GET:https://a/p/1"), None);
    assert_eq!(store.get_now("api:GET:https://a/x"), None);
    assert!(store.get_now("raw").is_some(), "a value that is not an entry has no tags");
    assert_eq!(store.purge_prefix_now("www:"), 1);
    assert_eq!(store.get_now("www:GET:https://a/p/2"), None);
    assert_eq!(store.stats_now().entries, 1);
}

#[test]
fn a_scan_of_one_time_keys_does_not_flush_the_working_set() {
    let store = MemoryStore::builder().capacity_bytes(64 << 20).max_entries(10_000).shards(1).build().expect("valid");
    for round in 0..3 {
        for i in 0..5_000 {
            let key = format!("hot{i}");
            if round == 0 {
                store.set_now(&key, b"v", None).expect("stored");
            } else {
                assert!(store.get_now(&key).is_some());
            }
        }
    }
    for i in 0..100_000 {
        store.set_now(&format!("scan{i}"), b"v", None).expect("stored");
    }
    let survivors = (0..5_000).filter(|i| store.contains(&format!("hot{i}"))).count();
    // Under LRU none would survive a scan ten times the cache size.
    assert!(survivors >= 4_500, "only {survivors} of 5000 hot entries survived the scan");
}

#[test]
fn clear_empties_every_shard() {
    let (store, _) = store_with_clock(16 << 20);
    for i in 0..1000 {
        store.set_now(&i.to_string(), b"v", None).expect("stored");
    }
    store.clear_now();
    assert_eq!(store.stats_now().entries, 0);
    assert_eq!(store.stats_now().bytes, 0);
    assert_eq!(store.get_now("1"), None);
}

#[tokio::test]
async fn the_async_interface_and_its_object_safe_twin_agree() {
    let (store, _) = store_with_clock(1 << 20);
    let dynamic: Arc<dyn DynStore> = Arc::new(store.clone());
    Store::set(&dynamic, "a", b"1", None).await.expect("set");
    Store::set(&store, "b", b"2", None).await.expect("set");
    let got = Store::get_many(&dynamic, &["a", "b", "c"]).await.expect("get_many");
    assert_eq!(
        got.iter().map(|v| v.as_deref().map(<[u8]>::to_vec)).collect::<Vec<_>>(),
        [Some(b"1".to_vec()), Some(b"2".to_vec()), None]
    );
    assert_eq!(Store::delete_many(&dynamic, &["a", "c"]).await.expect("delete_many"), 1);
    assert_eq!(Store::backend(&dynamic), "memory");
    let stats = Store::stats(&dynamic).await.expect("stats");
    assert_eq!((stats.hits, stats.misses, stats.entries), (2, 1, 1));
}

#[derive(Debug, Clone)]
enum Op {
    Set(u8, Vec<u8>),
    Add(u8, Vec<u8>),
    Delete(u8),
    Get(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<u8>(), prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(k, v)| Op::Set(k, v)),
        (any::<u8>(), prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(k, v)| Op::Add(k, v)),
        any::<u8>().prop_map(Op::Delete),
        any::<u8>().prop_map(Op::Get),
    ]
}

proptest! {
    /// With room for everything, the store behaves exactly like a map.
    #[test]
    fn behaves_like_a_map_when_nothing_is_evicted(ops in prop::collection::vec(op(), 1..300)) {
        let store = MemoryStore::builder().capacity_bytes(16 << 20).maintenance_interval(None).build().expect("valid");
        let mut model: HashMap<u8, Vec<u8>> = HashMap::new();
        for op in ops {
            match op {
                Op::Set(k, v) => {
                    store.set_now(&k.to_string(), &v, None).expect("fits");
                    model.insert(k, v);
                }
                Op::Add(k, v) => {
                    let stored = store.add_now(&k.to_string(), &v, None).expect("fits");
                    prop_assert_eq!(stored, !model.contains_key(&k));
                    model.entry(k).or_insert(v);
                }
                Op::Delete(k) => prop_assert_eq!(store.delete_now(&k.to_string()), model.remove(&k).is_some()),
                Op::Get(k) => prop_assert_eq!(store.get_now(&k.to_string()).map(|v| v.to_vec()), model.get(&k).cloned()),
            }
        }
        prop_assert_eq!(store.stats_now().entries as usize, model.len());
    }
}

#[test]
fn the_largest_value_it_advertises_fits_under_the_longest_safe_key() {
    use larder_store::Store;
    let store = MemoryStore::builder().capacity_bytes(1 << 20).build().expect("valid");
    let most = Store::max_value_bytes(&store);
    assert!(most > 60_000 && most < 1 << 16, "about a sixteenth of capacity: {most}");
    let key = "k".repeat(larder_format::key::MAX_KEY_LEN);
    assert!(store.set_now(&key, &vec![0u8; most], None).is_ok());
    assert!(store.set_now(&key, &vec![0u8; most + 1], None).is_err());
}

#[test]
fn a_value_is_the_same_entry_only_while_it_is_not_replaced() {
    let store = MemoryStore::builder().build().expect("valid");
    store.set_now("k", b"one", None).expect("stored");
    let first = store.get_now("k").expect("found");
    assert!(first.same_entry(&store.get_now("k").expect("found")));
    store.set_now("k", b"one", None).expect("stored again");
    assert!(!first.same_entry(&store.get_now("k").expect("found")), "equal bytes, another entry");
}
