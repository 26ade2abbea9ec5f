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

/// The bytes of a file of the store's own form for `key`: what a store that followed a link would read as a hit.
fn store_form(key: &str, value: &[u8]) -> Vec<u8> {
    let mut bytes = b"LDR1".to_vec();
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&(key.len() as u16).to_le_bytes());
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(value);
    bytes
}

/// Issue 32, finding 2 (spec/STORES.md §7, "Links are never followed below the root"): a link in any component
/// below the root (the first shard directory, the second, the entry) is followed by no operation. Each link leads
/// to a file of the store's own form for its key, so a store that followed it would read a hit, delete it, or
/// create a file beside it.
#[tokio::test]
async fn links_in_any_component_are_never_followed_for_any_operation() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("dir");
    let outside = tempfile::tempdir().expect("outside");
    let store = open(dir.path(), "").await;
    let mut cases = Vec::new();
    for (key, level) in [("first-level", 1), ("second-level", 2), ("entry", 3)] {
        let h = hex::encode(Sha256::digest(key.as_bytes()));
        let target = outside.path().join(key);
        std::fs::create_dir_all(target.join(&h[2..4])).expect("dir");
        let planted = match level {
            1 => target.join(&h[2..4]).join(&h),
            2 => target.join(&h),
            _ => target.join("precious"),
        };
        std::fs::write(&planted, store_form(key, b"planted")).expect("write");
        let link = match level {
            1 => dir.path().join(&h[0..2]),
            2 => dir.path().join(&h[0..2]).join(&h[2..4]),
            _ => dir.path().join(&h[0..2]).join(&h[2..4]).join(&h),
        };
        std::fs::create_dir_all(link.parent().expect("parent")).expect("dir");
        let points_to = match level {
            1 => target.clone(),
            2 => target.clone(),
            _ => planted.clone(),
        };
        symlink(&points_to, &link).expect("symlink");
        cases.push((key, target, planted, link));
    }
    let listing = |target: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = walk(target).into_iter().map(|p| p.display().to_string()).collect();
        names.sort();
        names
    };
    let before: Vec<Vec<String>> = cases.iter().map(|(_, target, _, _)| listing(target)).collect();
    for (key, _, _, _) in &cases {
        assert_eq!(store.get(key).await.expect("a miss, not an error"), None, "{key}: get read through the link");
        let many = store.get_many(&[key]).await.expect("get_many");
        assert_eq!(many, vec![None], "{key}: get_many read through the link");
        assert!(store.set(key, b"mine", None).await.is_err(), "{key}: set wrote through or replaced the link");
        assert!(store.add(key, b"mine", None).await.is_err(), "{key}: add wrote through the link");
        assert!(store.incr(key, 1, None, true).await.is_err(), "{key}: incr wrote through the link");
        assert!(!store.delete(key).await.expect("delete is a no-op"), "{key}: delete went through the link");
        assert_eq!(store.delete_many(&[key]).await.expect("delete_many"), 0, "{key}");
        assert!(!store.delete_if(key, b"planted").await.expect("delete_if is a no-op"), "{key}");
    }
    store.purge_prefix("").await.expect("purge_prefix");
    store.purge_tag("t").await.expect("purge_tag");
    store.clear().await.expect("clear");
    let stats = store.stats().await.expect("stats");
    assert_eq!(stats.entries, 0, "nothing behind a link is counted as the store's: {stats:?}");
    for ((key, target, planted, link), before) in cases.iter().zip(before) {
        assert!(std::fs::symlink_metadata(link).expect("the link").file_type().is_symlink(), "{key}: link replaced");
        assert_eq!(std::fs::read(planted).expect("planted"), store_form(key, b"planted"), "{key}: target touched");
        assert_eq!(listing(target), before, "{key}: a file was created or removed behind the link");
    }
}

/// Every path under `dir`, recursively (links not followed).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

/// The process umask, from /proc (reading it with umask(2) would change it for the other tests' threads).
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = status.lines().find_map(|l| l.strip_prefix("Umask:")).expect("Umask line");
    u32::from_str_radix(line.trim(), 8).expect("octal")
}

/// Issue 32, finding 6: a cache of private pages was world-readable (files 0644, directories 0755). Files are
/// created 0600 and directories 0700 unless `mode=` says otherwise (a search bit wherever there is a read bit); the
/// umask may narrow them further; a mode without the owner's read and write is a URL error.
#[tokio::test]
async fn files_and_directories_are_the_owners_alone_unless_the_url_says_otherwise() {
    use std::os::unix::fs::PermissionsExt;
    let mask = umask();
    let mode_of = |path: &std::path::Path| std::fs::metadata(path).expect("metadata").permissions().mode() & 0o7777;
    for (options, file_mode, dir_mode) in
        [("", 0o600, 0o700), ("?mode=0640", 0o640, 0o750), ("?mode=644", 0o644, 0o755)]
    {
        let parent = tempfile::tempdir().expect("dir");
        let root = parent.path().join("cache");
        let store = open(&root, options).await;
        store.set("k", b"v", None).await.expect("set");
        store.add("a", b"v", None).await.expect("add");
        let h = hex::encode(Sha256::digest(b"k"));
        let shard = root.join(&h[0..2]);
        assert_eq!(mode_of(&root), dir_mode & !mask, "{options:?}: the root it created");
        assert_eq!(mode_of(&shard), dir_mode & !mask, "{options:?}: the first shard directory");
        assert_eq!(mode_of(&shard.join(&h[2..4])), dir_mode & !mask, "{options:?}: the second");
        assert_eq!(mode_of(&shard.join(&h[2..4]).join(&h)), file_mode & !mask, "{options:?}: the value file");
        let a = hex::encode(Sha256::digest(b"a"));
        let lock = root.join(&a[0..2]).join(&a[2..4]).join(".lock");
        assert_eq!(mode_of(&lock), file_mode & !mask, "{options:?}: the lock file");
    }
    for bad in ["?mode=0400", "?mode=0200", "?mode=4600", "?mode=0680", "?mode=60", "?mode=rw"] {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!("file://{}{bad}", dir.path().display());
        let opened = FileStore::open(StoreUrl::parse(&url).expect("url")).await;
        assert!(matches!(opened, Err(larder_store::OpenError::Url(_))), "{bad}: a URL error");
    }
}
