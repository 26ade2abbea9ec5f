//! The file store on a real directory: the shared behaviour suite, the layout of spec/STORES.md §7 byte for byte,
//! two "processes" (store instances) on one directory, exact counters under concurrency (flock), whole files
//! under rewrites, the byte bound, and corrupt files.

use std::sync::Arc;

use larder_file::FileStore;
use larder_store::{Store, StoreUrl};
use larder_testkit::behaviour;
use sha2::{Digest, Sha256};

async fn open(dir: &std::path::Path, options: &str) -> FileStore {
    let url = format!("file://{}{options}", dir.display());
    FileStore::open(StoreUrl::parse(&url).expect("url")).await.expect("opens")
}

#[tokio::test]
async fn behaves_as_every_store_must() {
    let dir = tempfile::tempdir().expect("dir");
    let store = open(dir.path(), "").await;
    behaviour::check_all(&store).await;
    behaviour::purges_across(&store, &open(dir.path(), "").await).await;
    behaviour::expiry(&store).await;
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn files_are_laid_out_as_the_spec_says() {
    let dir = tempfile::tempdir().expect("dir");
    let store = open(dir.path(), "").await;
    let entry = behaviour::entry("v", Some(60_000), 5_000, &[]);
    store.set("user:42", &entry, None).await.expect("set");
    let h = hex::encode(Sha256::digest(b"user:42"));
    let bytes = std::fs::read(dir.path().join(&h[0..2]).join(&h[2..4]).join(&h)).expect("the file is where §7 says");
    assert_eq!(&bytes[0..4], b"LDR1");
    let header = larder_format::Header::parse(&entry).expect("entry").0;
    let expires_at = u64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
    assert_eq!(expires_at, header.expires_at + 5_000, "the hard expiry");
    assert_eq!(u16::from_le_bytes([bytes[12], bytes[13]]), 7);
    assert_eq!(&bytes[14..21], b"user:42");
    assert_eq!(&bytes[21..], &entry[..], "then the entry, byte for byte");
}

#[tokio::test]
async fn two_processes_share_a_directory_and_count_exactly() {
    let dir = tempfile::tempdir().expect("dir");
    let (a, b) = (Arc::new(open(dir.path(), "").await), Arc::new(open(dir.path(), "").await));
    a.set("k", b"from a", None).await.expect("set");
    assert_eq!(b.get("k").await.expect("get").as_deref(), Some(&b"from a"[..]));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                store.incr("hits", 1, None, true).await.expect("incr");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(a.incr("hits", 0, None, false).await.expect("incr"), Some(200), "no increment lost");
}

#[tokio::test]
async fn a_reader_never_sees_half_a_file() {
    let dir = tempfile::tempdir().expect("dir");
    let (writer, reader) = (open(dir.path(), "").await, open(dir.path(), "").await);
    let big_a = vec![b'a'; 256 * 1024];
    let big_b = vec![b'b'; 256 * 1024];
    writer.set("k", &big_a, None).await.expect("set");
    let writing = tokio::spawn(async move {
        for i in 0..100 {
            writer.set("k", if i % 2 == 0 { &big_b } else { &big_a }, None).await.expect("set");
        }
    });
    for _ in 0..200 {
        let value = reader.get("k").await.expect("get").expect("always present");
        assert!(value.len() == 256 * 1024 && (value.iter().all(|&c| c == b'a') || value.iter().all(|&c| c == b'b')));
    }
    writing.await.expect("writer");
}

#[tokio::test]
async fn the_byte_bound_holds() {
    let dir = tempfile::tempdir().expect("dir");
    let store = open(dir.path(), "?capacity=1M").await;
    for i in 0..100 {
        store.set(&format!("k{i}"), &vec![0u8; 40 * 1024], None).await.expect("set");
    }
    let stats = store.stats().await.expect("stats");
    assert!(stats.bytes <= 1 << 20, "{stats:?}");
    assert!(stats.entries >= 15, "{stats:?}");
    assert!(store.get("k99").await.expect("get").is_some(), "the newest stays");
    assert_eq!(store.get("k0").await.expect("get"), None, "the oldest went");
}

#[tokio::test]
async fn corrupt_files_are_misses() {
    let dir = tempfile::tempdir().expect("dir");
    let store = open(dir.path(), "").await;
    store.set("k", b"value", None).await.expect("set");
    let h = hex::encode(Sha256::digest(b"k"));
    let path = dir.path().join(&h[0..2]).join(&h[2..4]).join(&h);
    std::fs::write(&path, b"LDR1\x00").expect("corrupt");
    assert_eq!(store.get("k").await.expect("a miss, not an error"), None);
    assert!(!path.exists(), "removed");
    let relative = FileStore::open(StoreUrl::parse("file://relative/dir").expect("url")).await;
    assert!(relative.is_err());
}
