//! The SQL stores on a real SQLite file and a real PostgreSQL server (larder-testkit): the shared behaviour
//! suite, the schema of spec/STORES.md §6, key hashes, two store instances on one database, a newer schema
//! refused, and a PostgreSQL restart.

use std::time::{Duration, Instant};

use larder_sql::SqlStore;
use larder_store::{Store, StoreUrl};
use larder_testkit::{behaviour, Postgres};
use sha2::{Digest, Sha256};

async fn open(url: &str) -> SqlStore {
    SqlStore::open(StoreUrl::parse(url).expect("url")).await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn sqlite(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}/cache.db", dir.path().display())
}

#[tokio::test]
async fn sqlite_behaves_as_every_store_must() {
    let dir = tempfile::tempdir().expect("dir");
    let store = open(&sqlite(&dir)).await;
    behaviour::check_all(&store).await;
    behaviour::purges_across(&store, &open(&sqlite(&dir)).await).await;
    behaviour::expiry(&store).await;
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn postgres_behaves_as_every_store_must() {
    let postgres = Postgres::start().expect("postgres");
    let store = open(&postgres.url()).await;
    behaviour::check_all(&store).await;
    behaviour::purges_across(&store, &open(&postgres.url()).await).await;
    behaviour::expiry(&store).await;
    behaviour::clear(&store).await;
}

#[tokio::test]
async fn rows_follow_the_spec() {
    let dir = tempfile::tempdir().expect("dir");
    let url = sqlite(&dir);
    let store = open(&url).await;
    let entry = behaviour::entry("v", Some(60_000), 1_000, &["a", "b"]);
    store.set("user:42", &entry, None).await.expect("set");
    let header = larder_format::Header::parse(&entry).expect("entry").0;
    let digest = Sha256::digest(b"user:42");
    let hash = i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    let pool = sqlx::SqlitePool::connect(&format!("{url}?mode=ro")).await.expect("read the file directly");
    let row: (i64, String, Vec<u8>, i64, Option<i64>) =
        sqlx::query_as("SELECT key_hash, key, value, byte_size, expires_at FROM larder_entries")
            .fetch_one(&pool)
            .await
            .expect("row");
    assert_eq!(row.0, hash, "key_hash: the first 8 bytes of SHA-256, big-endian signed");
    assert_eq!(row.1, "user:42");
    assert_eq!(row.2, entry);
    assert_eq!(row.3, (7 + entry.len()) as i64);
    assert_eq!(row.4, Some((header.expires_at + 1_000) as i64), "the hard expiry");
    let tags: Vec<(String, i64)> = sqlx::query_as("SELECT tag, key_hash FROM larder_entries_tags ORDER BY tag")
        .fetch_all(&pool)
        .await
        .expect("tags");
    assert_eq!(tags, vec![("a".to_owned(), hash), ("b".to_owned(), hash)]);
    let version: i64 =
        sqlx::query_scalar("SELECT version FROM larder_entries_schema").fetch_one(&pool).await.expect("version");
    assert_eq!(version, 1);
    // Rewritten without tags: its index rows go.
    store.set("user:42", b"plain", None).await.expect("set");
    let count: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM larder_entries_tags").fetch_one(&pool).await.expect("count");
    assert_eq!(count, 0);
}

#[tokio::test]
async fn a_newer_schema_is_refused_with_both_versions_named() {
    let dir = tempfile::tempdir().expect("dir");
    let url = sqlite(&dir);
    drop(open(&url).await);
    let pool = sqlx::SqlitePool::connect(&url).await.expect("connect");
    sqlx::query("UPDATE larder_entries_schema SET version = 2").execute(&pool).await.expect("update");
    let error = match SqlStore::open(StoreUrl::parse(&url).expect("url")).await {
        Ok(_) => panic!("a newer schema was accepted"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("version 2") && error.contains("version 1"), "{error}");
}

#[tokio::test]
async fn two_processes_on_one_sqlite_file_count_exactly() {
    let dir = tempfile::tempdir().expect("dir");
    let (a, b) = (std::sync::Arc::new(open(&sqlite(&dir)).await), std::sync::Arc::new(open(&sqlite(&dir)).await));
    let mut tasks = Vec::new();
    for i in 0..20 {
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
    assert_eq!(b.incr("hits", 0, None, false).await.expect("read"), Some(100));
}

#[tokio::test]
async fn postgres_restarts_are_survived_and_outages_fail_fast() {
    let mut postgres = Postgres::start().expect("postgres");
    let store = open(&format!("{}?timeout=300ms&connect_timeout=300ms", postgres.url())).await;
    store.set("k", b"before", None).await.expect("set");
    postgres.stop();
    let started = Instant::now();
    let error = store.get("k").await.expect_err("down");
    assert!(error.to_string().contains(&format!("127.0.0.1:{}", postgres.port())), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    postgres.restart().expect("restarts");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match store.get("k").await {
            Ok(value) => {
                assert_eq!(value.as_deref(), Some(&b"before"[..]), "the data survived the restart");
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "reconnects by itself: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn bad_urls_are_refused() {
    for (url, says) in [
        ("sqlite:///tmp/x.db?table=Robert');DROP", "table"),
        ("sqlite:///tmp/x.db?pool=3", "unknown option pool"),
        ("postgres://a@h1:5432,h2:5432/db", "one host"),
    ] {
        let error = match SqlStore::open(StoreUrl::parse(url).expect("url")).await {
            Ok(_) => panic!("{url} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(says), "{url}: {error}");
    }
}
