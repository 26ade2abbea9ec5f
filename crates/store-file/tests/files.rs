//! The file store on a real directory: the shared behaviour suite, the layout of spec/STORES.md §7 byte for byte,
//! two "processes" (store instances) on one directory, exact counters under concurrency (flock), whole files
//! under rewrites, the byte bound, corrupt files, and a directory shared with files and links larder did not write
//! (which it never deletes, reads through or counts).

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
    assert!(path.exists(), "a file that does not prove itself larder's is left alone");
    store.set("k", b"again", None).await.expect("a write replaces it");
    assert_eq!(store.get("k").await.expect("get").as_deref(), Some(&b"again"[..]));
    let relative = FileStore::open(StoreUrl::parse("file://relative/dir").expect("url")).await;
    assert!(relative.is_err());
}

/// Files and links larder did not write, placed where its scans look: at the root, in shard directories, with
/// larder's name pattern but another file's content, and links to files and directories outside the root.
struct Planted {
    _outside: tempfile::TempDir,
    outside_file: std::path::PathBuf,
    paths: Vec<std::path::PathBuf>,
}

fn plant_foreign_files(root: &std::path::Path) -> Planted {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().expect("dir");
    let outside_file = outside.path().join("precious");
    std::fs::write(&outside_file, vec![b'p'; 64 * 1024]).expect("write");
    std::fs::create_dir_all(outside.path().join("cd")).expect("dir");
    let victim = hex::encode(Sha256::digest(b"victim"));
    std::fs::write(outside.path().join("cd").join(&victim), b"LDR1 not larder's").expect("write");
    let mut paths = Vec::new();
    let mut put = |relative: &str, bytes: &[u8]| {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(&path, bytes).expect("write");
        paths.push(path);
    };
    put("README", b"an operator's note");
    put("ab/cd/notes.txt", &[b'n'; 32 * 1024]);
    // larder's name pattern and magic, but a key whose hash is not the name.
    let mut forged = b"LDR1".to_vec();
    forged.extend_from_slice(&0u64.to_le_bytes());
    forged.extend_from_slice(&1u16.to_le_bytes());
    forged.push(b'x');
    forged.extend_from_slice(&[b'f'; 32 * 1024]);
    let name = hex::encode(Sha256::digest(b"not x"));
    put(&format!("{}/{}/{name}", &name[0..2], &name[2..4]), &forged);
    // A link with larder's name pattern to a file outside, and a shard directory that is a link.
    let linked = hex::encode(Sha256::digest(b"linked"));
    let dir = root.join(&linked[0..2]).join(&linked[2..4]);
    std::fs::create_dir_all(&dir).expect("dir");
    symlink(&outside_file, dir.join(&linked)).expect("symlink");
    paths.push(dir.join(&linked));
    std::fs::create_dir_all(root.join(&victim[0..2])).expect("dir");
    symlink(outside.path().join("cd"), root.join(&victim[0..2]).join(&victim[2..4])).expect("symlink");
    paths.push(root.join(&victim[0..2]).join(&victim[2..4]));
    Planted { _outside: outside, outside_file, paths }
}

#[tokio::test]
async fn only_its_own_files_are_counted_evicted_purged_or_cleared() {
    let dir = tempfile::tempdir().expect("dir");
    let planted = plant_foreign_files(dir.path());
    let store = open(dir.path(), "?capacity=256K").await;
    let stats = store.stats().await.expect("stats");
    assert_eq!(stats.entries, 0, "{stats:?}");
    assert_eq!(stats.foreign, 5, "{stats:?}");
    for i in 0..40 {
        store.set(&format!("k{i}"), &vec![0u8; 20 * 1024], None).await.expect("set");
    }
    let stats = store.stats().await.expect("stats");
    assert!(stats.bytes <= 256 << 10, "eviction holds the bound with its own files: {stats:?}");
    assert_eq!(stats.foreign, 5, "foreign files are neither counted nor evicted: {stats:?}");
    let tagged = behaviour::entry("v", Some(60_000), 0, &["t"]);
    store.set("tagged", &tagged, None).await.expect("set");
    store.purge_tag("t").await.expect("purge");
    store.purge_prefix("").await.expect("purge");
    store.clear().await.expect("clear");
    for path in &planted.paths {
        assert!(std::fs::symlink_metadata(path).is_ok(), "{} survived", path.display());
    }
    assert_eq!(std::fs::read(&planted.outside_file).expect("outside").len(), 64 * 1024, "untouched");
    assert_eq!(store.stats().await.expect("stats").entries, 0);
}

#[tokio::test]
async fn links_are_never_read_or_written_through() {
    let dir = tempfile::tempdir().expect("dir");
    let planted = plant_foreign_files(dir.path());
    let store = open(dir.path(), "").await;
    assert_eq!(store.get("linked").await.expect("a miss"), None, "a link at a key's name is not read");
    assert_eq!(store.get("victim").await.expect("a miss"), None, "nor a file behind a linked shard directory");
    assert!(store.set("victim", b"v", None).await.is_err(), "writing through a linked directory is refused");
    assert!(!store.delete("victim").await.expect("delete"), "nothing deleted through the link");
    let outside = planted._outside.path().join("cd").join(hex::encode(Sha256::digest(b"victim")));
    assert_eq!(std::fs::read(outside).expect("still there"), b"LDR1 not larder's");
    store.set("linked", b"mine", None).await.expect("a write replaces the link itself");
    assert_eq!(store.get("linked").await.expect("get").as_deref(), Some(&b"mine"[..]));
    assert_eq!(std::fs::read(&planted.outside_file).expect("outside").len(), 64 * 1024, "the link's target untouched");
}
