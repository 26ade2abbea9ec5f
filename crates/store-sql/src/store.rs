//! `SqlStore`: the URL's options, the pool, and the `Store` operations as SQL (spec/STORES.md §6).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use larder_store::expiry::expires_at_ms;
use larder_store::keys::{stored_key, stored_prefix};
use larder_store::{counter, FailurePolicy, Health, OpenError, Purged, Store, StoreError, StoreStats, StoreUrl, Value};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use sha2::{Digest, Sha256};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use tokio::sync::OnceCell;

use crate::schema::{self, Dialect, Tables, SCHEMA_VERSION};

/// One write in this many also deletes expired rows.
const SWEEP_EVERY: u64 = 100;
/// Expired rows deleted per sweep.
const SWEEP_ROWS: i64 = 1000;

/// An SQLite file or a PostgreSQL database (cheap to clone).
#[derive(Clone)]
pub struct SqlStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: AnyPool,
    dialect: Dialect,
    tables: Tables,
    /// The server (`host:port`) or the SQLite file, as errors name it.
    server: String,
    prefix: String,
    timeout: Duration,
    schema_ready: OnceCell<()>,
    writes: AtomicU64,
    /// PostgreSQL's failures and ejection (SQLite is a local file: never ejected, errors counted only).
    health: Health,
    policy: Option<FailurePolicy>,
}

/// The first 8 bytes of the key's SHA-256 as a big-endian signed integer (Solid Cache's key hash).
pub fn key_hash(key: &str) -> i64 {
    let digest = Sha256::digest(key.as_bytes());
    i64::from_be_bytes([digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6], digest[7]])
}

/// `$first, $first+1, …` for `count` parameters.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count).map(|i| format!("${i}")).collect::<Vec<_>>().join(",")
}

impl SqlStore {
    /// Opens `sqlite:///path/cache.db` (creating the file and tables) or `postgres://user@host:5432/db` (connecting
    /// on first use).
    pub async fn open(mut url: StoreUrl) -> Result<SqlStore, OpenError> {
        sqlx::any::install_default_drivers();
        let dialect = match url.scheme.as_str() {
            "sqlite" => Dialect::Sqlite,
            "postgres" | "postgresql" => Dialect::Postgres,
            _ => return Err(url.error("not a sqlite:// or postgres:// URL").into()),
        };
        let prefix = url.take("prefix").unwrap_or_default();
        let table = url.take("table").unwrap_or_else(|| "larder_entries".into());
        if !schema::valid_table_name(&table) {
            return Err(url.error(format!("table={table:?}: lowercase letters, digits and _ only")).into());
        }
        let (timeout, connect_timeout, pool, policy) = match dialect {
            Dialect::Postgres => (
                url.take_duration("timeout", Duration::from_millis(250))?,
                url.take_duration("connect_timeout", Duration::from_millis(500))?,
                url.take_number("pool", 8, 1..=256)? as u32,
                Some(FailurePolicy::from_url(&mut url, 2, Duration::from_secs(1))?),
            ),
            // A local file: a request waits at most SQLite's busy timeout for another process's write.
            Dialect::Sqlite => (Duration::from_secs(5), Duration::from_secs(5), 4, None),
        };
        url.finish()?;
        let (connect_url, server) = match dialect {
            Dialect::Sqlite => {
                url.no_hosts()?;
                if url.path.len() < 2 {
                    return Err(url.error("sqlite:// needs a file: sqlite:///var/lib/larder/cache.db").into());
                }
                (format!("sqlite://{}?mode=rwc", url.path), url.path.clone())
            }
            Dialect::Postgres => {
                let host = url.require_hosts()?;
                if host.len() != 1 {
                    return Err(url.error("postgres:// takes one host").into());
                }
                let address = host[0].address(5432);
                let encode = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
                let userinfo = match (&url.username, &url.password) {
                    (Some(user), Some(pass)) => format!("{}:{}@", encode(user), encode(pass)),
                    (Some(user), None) => format!("{}@", encode(user)),
                    _ => String::new(),
                };
                let db = url.path.trim_start_matches('/');
                (format!("postgres://{userinfo}{address}/{}", encode(db)), address)
            }
        };
        let options = AnyPoolOptions::new().max_connections(pool).acquire_timeout(connect_timeout);
        let options = match dialect {
            Dialect::Sqlite => options.after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::query("PRAGMA journal_mode=WAL").execute(&mut *conn).await?;
                    sqlx::query("PRAGMA busy_timeout=5000").execute(&mut *conn).await?;
                    Ok(())
                })
            }),
            Dialect::Postgres => options,
        };
        let pool = options.connect_lazy(&connect_url).map_err(|e| url.error(e.to_string()))?;
        let store = SqlStore {
            inner: Arc::new(Inner {
                health: Health::named(dialect.name(), &server),
                pool,
                dialect,
                tables: Tables::new(&table),
                server,
                prefix,
                timeout,
                schema_ready: OnceCell::new(),
                writes: AtomicU64::new(0),
                policy,
            }),
        };
        if dialect == Dialect::Sqlite {
            store.inner.ready().await?;
        }
        Ok(store)
    }
}

impl Inner {
    fn backend(&self) -> &'static str {
        self.dialect.name()
    }

    fn timed_out(&self) -> StoreError {
        StoreError::Timeout {
            backend: self.backend(),
            server: self.server.clone(),
            timeout_ms: self.timeout.as_millis() as u64,
        }
    }

    /// Records an outcome (`Err` with why it failed): the server's unavailability is a failure that may eject it;
    /// an error answer (a constraint, say) is only counted.
    fn record(&self, outcome: Result<(), &str>, unavailable: bool) {
        match (self.policy, outcome) {
            (Some(_), Ok(())) => self.health.succeeded(),
            (Some(policy), Err(why)) if unavailable => {
                self.health.failed(why, policy, larder_format::now_ms());
            }
            (_, Err(_)) => self.health.count_error(),
            (None, Ok(())) => {}
        }
    }

    fn fail(&self, error: sqlx::Error) -> StoreError {
        let unavailable = matches!(
            error,
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_)
        );
        self.record(Err(&error.to_string()), unavailable);
        match error {
            sqlx::Error::PoolTimedOut => self.timed_out(),
            other => {
                StoreError::Server { backend: self.backend(), server: self.server.clone(), message: other.to_string() }
            }
        }
    }

    /// Runs `work` within the store's timeout, once the tables exist; at once an error while the server is ejected.
    async fn run<T>(&self, work: impl std::future::Future<Output = Result<T, sqlx::Error>>) -> Result<T, StoreError> {
        if self.policy.is_some() && !self.health.admits(larder_format::now_ms()) {
            self.health.count_error();
            return Err(StoreError::Server {
                backend: self.backend(),
                server: self.server.clone(),
                message: "ejected after failing; not tried until retry_after has passed".into(),
            });
        }
        self.ready().await?;
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(value)) => {
                self.record(Ok(()), false);
                Ok(value)
            }
            Ok(Err(error)) => Err(self.fail(error)),
            Err(_) => {
                self.record(Err(&format!("no answer within {} ms", self.timeout.as_millis())), true);
                Err(self.timed_out())
            }
        }
    }

    /// Creates the tables when missing and checks the schema version, once per store (again after a failure).
    async fn ready(&self) -> Result<(), StoreError> {
        self.schema_ready
            .get_or_try_init(|| async {
                let create = async {
                    for statement in schema::create(self.dialect, &self.tables) {
                        sqlx::query(&statement).execute(&self.pool).await?;
                    }
                    let version: Option<i64> =
                        sqlx::query_scalar(&format!("SELECT CAST(MAX(version) AS BIGINT) FROM {}", self.tables.schema))
                            .fetch_one(&self.pool)
                            .await?;
                    if version.is_none() {
                        sqlx::query(&format!("INSERT INTO {} (version) VALUES ($1)", self.tables.schema))
                            .bind(SCHEMA_VERSION)
                            .execute(&self.pool)
                            .await?;
                    }
                    Ok::<_, sqlx::Error>(version)
                };
                let version = match tokio::time::timeout(self.timeout.max(Duration::from_secs(2)), create).await {
                    Ok(result) => result.map_err(|e| self.fail(e))?,
                    Err(_) => {
                        self.record(Err("no answer while creating the tables"), true);
                        return Err(self.timed_out());
                    }
                };
                match version {
                    Some(v) if v > SCHEMA_VERSION => Err(StoreError::Server {
                        backend: self.backend(),
                        server: self.server.clone(),
                        message: format!(
                            "table {} is at schema version {v}; this larder knows version {SCHEMA_VERSION} (upgrade larder)",
                            self.tables.entries
                        ),
                    }),
                    _ => Ok(()),
                }
            })
            .await
            .map(|_| ())
    }

    fn key(&self, key: &str) -> Result<String, StoreError> {
        Ok(stored_key(self.backend(), &self.prefix, key)?.into_owned())
    }

    /// Rows for stored keys, live ones only, in the order asked.
    async fn get_stored(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let sql = format!(
            "SELECT key, value, expires_at FROM {} WHERE key_hash IN ({})",
            self.tables.entries,
            placeholders(1, keys.len())
        );
        let rows: Vec<AnyRow> = self
            .run(async {
                let mut query = sqlx::query(&sql);
                for key in keys {
                    query = query.bind(key_hash(key));
                }
                query.fetch_all(&self.pool).await
            })
            .await?;
        let now = larder_format::now_ms() as i64;
        let mut found = std::collections::HashMap::new();
        for row in rows {
            let key: String = row.try_get("key").map_err(|e| self.fail(e))?;
            let value: Vec<u8> = row.try_get("value").map_err(|e| self.fail(e))?;
            let expires_at: Option<i64> = row.try_get("expires_at").map_err(|e| self.fail(e))?;
            if expires_at.is_none_or(|at| at > now) {
                found.insert(key, value);
            }
        }
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    /// Writes rows and their tags in one transaction; with `only_if_absent`, a row that is live is left alone and
    /// the answer says whether this one was stored.
    async fn write(
        &self,
        items: &[(String, &[u8])],
        ttl: Option<Duration>,
        only_if_absent: bool,
    ) -> Result<bool, StoreError> {
        let now = larder_format::now_ms();
        let e = &self.tables.entries;
        let upsert = format!(
            "INSERT INTO {e} (key_hash, key, value, byte_size, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (key_hash) DO UPDATE SET key = excluded.key, value = excluded.value, byte_size = excluded.byte_size, \
             created_at = excluded.created_at, expires_at = excluded.expires_at{}",
            if only_if_absent { format!(" WHERE {e}.expires_at IS NOT NULL AND {e}.expires_at <= $7") } else { String::new() }
        );
        let delete = format!("DELETE FROM {e} WHERE key_hash = $1");
        let untag = format!("DELETE FROM {} WHERE key_hash = $1", self.tables.tags);
        let tag = format!("INSERT INTO {} (tag, key_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING", self.tables.tags);
        let stored = self
            .run(async {
                let mut tx = self.pool.begin().await?;
                let mut stored = true;
                for (key, value) in items {
                    let hash = key_hash(key);
                    let expiry = expires_at_ms(value, ttl, now);
                    if expiry.is_some_and(|at| at <= now) {
                        if only_if_absent {
                            stored = false;
                            continue;
                        }
                        sqlx::query(&delete).bind(hash).execute(&mut *tx).await?;
                        sqlx::query(&untag).bind(hash).execute(&mut *tx).await?;
                        continue;
                    }
                    let mut query = sqlx::query(&upsert)
                        .bind(hash)
                        .bind(key.as_str())
                        .bind(value.to_vec())
                        .bind((key.len() + value.len()) as i64)
                        .bind(now as i64)
                        .bind(expiry.map(|at| at as i64));
                    if only_if_absent {
                        query = query.bind(now as i64);
                    }
                    let written = query.execute(&mut *tx).await?.rows_affected() == 1;
                    stored &= written;
                    if !written {
                        continue;
                    }
                    sqlx::query(&untag).bind(hash).execute(&mut *tx).await?;
                    if let Ok((header, _)) = larder_format::Header::parse(value) {
                        for name in &header.tags {
                            sqlx::query(&tag).bind(*name).bind(hash).execute(&mut *tx).await?;
                        }
                    }
                }
                tx.commit().await?;
                Ok(stored)
            })
            .await?;
        if self.writes.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep().await?;
        }
        Ok(stored)
    }

    /// Deletes up to `SWEEP_ROWS` rows whose expiry has passed.
    async fn sweep(&self) -> Result<(), StoreError> {
        let e = &self.tables.entries;
        let sql = format!(
            "DELETE FROM {e} WHERE key_hash IN (SELECT key_hash FROM {e} WHERE expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2)"
        );
        self.run(sqlx::query(&sql).bind(larder_format::now_ms() as i64).bind(SWEEP_ROWS).execute(&self.pool)).await?;
        Ok(())
    }

    /// Deletes rows (and their tags) by key hash; how many rows there were.
    async fn delete_hashes(&self, hashes: &[i64]) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for chunk in hashes.chunks(500) {
            let list = placeholders(1, chunk.len());
            let rows = format!("DELETE FROM {} WHERE key_hash IN ({list})", self.tables.entries);
            let tags = format!("DELETE FROM {} WHERE key_hash IN ({list})", self.tables.tags);
            deleted += self
                .run(async {
                    let mut tx = self.pool.begin().await?;
                    let mut query = sqlx::query(&rows);
                    let mut untag = sqlx::query(&tags);
                    for hash in chunk {
                        query = query.bind(*hash);
                        untag = untag.bind(*hash);
                    }
                    let n = query.execute(&mut *tx).await?.rows_affected();
                    untag.execute(&mut *tx).await?;
                    tx.commit().await?;
                    Ok(n as usize)
                })
                .await?;
        }
        Ok(deleted)
    }

    async fn hashes(&self, sql: &str, param: &str) -> Result<Vec<i64>, StoreError> {
        self.run(sqlx::query_scalar::<_, i64>(sql).bind(param).fetch_all(&self.pool)).await
    }
}

impl Store for SqlStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    /// PostgreSQL's bytea holds up to 1 GiB; SQLite's default blob limit is 1,000,000,000 bytes.
    fn max_value_bytes(&self) -> usize {
        512 << 20
    }

    fn server_errors(&self) -> Vec<(String, u64)> {
        match self.inner.dialect {
            Dialect::Postgres => vec![(self.inner.server.clone(), self.inner.health.errors())],
            Dialect::Sqlite => Vec::new(),
        }
    }

    fn server_reports(&self) -> Vec<larder_store::ServerReport> {
        match self.inner.dialect {
            Dialect::Postgres => vec![self.inner.health.report(&self.inner.server)],
            Dialect::Sqlite => Vec::new(),
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, StoreError> {
        Ok(self.get_many(&[key]).await?.pop().flatten())
    }

    async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let stored = keys.iter().map(|k| self.inner.key(k)).collect::<Result<Vec<String>, _>>()?;
        let mut values = Vec::with_capacity(keys.len());
        for chunk in stored.chunks(500) {
            values.extend(self.inner.get_stored(chunk).await?.into_iter().map(|v| v.map(Value::from)));
        }
        Ok(values)
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        self.set_many(&[(key, value)], ttl).await
    }

    async fn set_many(&self, items: &[(&str, &[u8])], ttl: Option<Duration>) -> Result<(), StoreError> {
        let limit = self.max_value_bytes();
        let mut rows = Vec::with_capacity(items.len());
        for (key, value) in items {
            if value.len() > limit {
                return Err(StoreError::TooLarge {
                    backend: self.backend(),
                    key: (*key).to_owned(),
                    size: value.len(),
                    limit,
                });
            }
            rows.push((self.inner.key(key)?, *value));
        }
        self.inner.write(&rows, ttl, false).await.map(|_| ())
    }

    async fn add(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        self.inner.write(&[(self.inner.key(key)?, value)], ttl, true).await
    }

    async fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        let stored = self.inner.key(key)?;
        let hash = key_hash(&stored);
        let e = &self.inner.tables.entries;
        let select = format!("SELECT value, expires_at FROM {e} WHERE key_hash = $1 AND key = $2");
        let update = format!("UPDATE {e} SET value = $1, byte_size = $2 WHERE key_hash = $3 AND value = $4");
        // Optimistic: read, then write only if the value is still the one read; another writer in between means
        // reading again. Works the same on both databases, with no lock held across the round trips.
        for _ in 0..100 {
            let row: Option<AnyRow> = self
                .inner
                .run(sqlx::query(&select).bind(hash).bind(stored.as_str()).fetch_optional(&self.inner.pool))
                .await?;
            let now = larder_format::now_ms() as i64;
            let live = row.and_then(|row| {
                let value: Vec<u8> = row.try_get("value").ok()?;
                let expires_at: Option<i64> = row.try_get("expires_at").ok()?;
                expires_at.is_none_or(|at| at > now).then_some(value)
            });
            let Some(current) = live else {
                if !create {
                    return Ok(None);
                }
                let text = counter::format(delta);
                if self.inner.write(&[(stored.clone(), text.as_bytes())], ttl, true).await? {
                    return Ok(Some(delta));
                }
                continue;
            };
            let number = counter::parse(&current)
                .ok_or_else(|| StoreError::NotACounter { backend: self.backend(), key: key.to_owned() })?;
            let next = number.saturating_add(delta);
            let text = counter::format(next);
            let updated = self
                .inner
                .run(
                    sqlx::query(&update)
                        .bind(text.as_bytes().to_vec())
                        .bind((stored.len() + text.len()) as i64)
                        .bind(hash)
                        .bind(current)
                        .execute(&self.inner.pool),
                )
                .await?;
            if updated.rows_affected() == 1 {
                return Ok(Some(next));
            }
        }
        Err(StoreError::Server {
            backend: self.backend(),
            server: self.inner.server.clone(),
            message: format!("counter {key:?} kept changing under 100 attempts to update it"),
        })
    }

    async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool, StoreError> {
        let stored = self.inner.key(key)?;
        let sql = format!("DELETE FROM {} WHERE key_hash = $1 AND key = $2 AND value = $3", self.inner.tables.entries);
        let deleted = self
            .inner
            .run(
                sqlx::query(&sql)
                    .bind(key_hash(&stored))
                    .bind(stored.as_str())
                    .bind(expected.to_vec())
                    .execute(&self.inner.pool),
            )
            .await?;
        Ok(deleted.rows_affected() == 1)
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.delete_many(&[key]).await? == 1)
    }

    async fn delete_many(&self, keys: &[&str]) -> Result<usize, StoreError> {
        let stored = keys.iter().map(|k| self.inner.key(k)).collect::<Result<Vec<String>, _>>()?;
        let live = self.inner.get_stored(&stored).await?;
        let hashes: Vec<i64> =
            stored.iter().zip(&live).filter(|(_, v)| v.is_some()).map(|(k, _)| key_hash(k)).collect();
        self.inner.delete_hashes(&hashes).await
    }

    async fn clear(&self) -> Result<(), StoreError> {
        if self.inner.prefix.is_empty() {
            let (e, t) = (&self.inner.tables.entries, &self.inner.tables.tags);
            let (rows, tags) = (format!("DELETE FROM {e}"), format!("DELETE FROM {t}"));
            self.inner
                .run(async {
                    sqlx::query(&rows).execute(&self.inner.pool).await?;
                    sqlx::query(&tags).execute(&self.inner.pool).await
                })
                .await
                .map(|_| ())
        } else {
            self.purge_prefix("").await.map(|_| ())
        }
    }

    async fn purge_prefix(&self, prefix: &str) -> Result<Purged, StoreError> {
        let stored = stored_prefix(self.backend(), &self.inner.prefix, prefix)?;
        let sql = format!(
            "SELECT key_hash FROM {} WHERE substr(key, 1, {}) = $1",
            self.inner.tables.entries,
            stored.chars().count()
        );
        let hashes = self.inner.hashes(&sql, &stored).await?;
        self.inner.delete_hashes(&hashes).await.map(Purged::Removed)
    }

    async fn purge_tag(&self, tag: &str) -> Result<Purged, StoreError> {
        let sql = format!("SELECT key_hash FROM {} WHERE tag = $1", self.inner.tables.tags);
        let hashes = self.inner.hashes(&sql, tag).await?;
        let deleted = self.inner.delete_hashes(&hashes).await?;
        let untag = format!("DELETE FROM {} WHERE tag = $1", self.inner.tables.tags);
        self.inner.run(sqlx::query(&untag).bind(tag).execute(&self.inner.pool)).await?;
        Ok(Purged::Removed(deleted))
    }

    async fn stats(&self) -> Result<StoreStats, StoreError> {
        let sql = format!(
            "SELECT CAST(COUNT(*) AS BIGINT) AS n, CAST(COALESCE(SUM(byte_size), 0) AS BIGINT) AS bytes FROM {}",
            self.inner.tables.entries
        );
        let row: AnyRow = self.inner.run(sqlx::query(&sql).fetch_one(&self.inner.pool)).await?;
        let entries: i64 = row.try_get("n").map_err(|e| self.inner.fail(e))?;
        let bytes: i64 = row.try_get("bytes").map_err(|e| self.inner.fail(e))?;
        Ok(StoreStats { entries: entries.max(0) as u64, bytes: bytes.max(0) as u64, ..StoreStats::default() })
    }
}
