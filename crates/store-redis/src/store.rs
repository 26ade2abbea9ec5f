//! `RedisStore`: the URL's options, and the `Store` operations as Redis commands (spec/STORES.md §5).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use larder_pipeline::Connections;
use larder_store::expiry::expires_at_ms;
use larder_store::keys::{internal_key, stored_key, stored_prefix};
use larder_store::{FailurePolicy, Health, OpenError, Purged, Store, StoreError, StoreStats, StoreUrl, Value};
use redis::{AsyncCommands, ConnectionAddr, ConnectionInfo, RedisConnectionInfo, RedisResult};

use crate::connect::{Handle, Pool, Target, DEFAULT_MAX_VALUE};
use crate::resp::{self, Expect, Reply, Resp};
use crate::scripts;

/// Keys deleted per DEL while purging.
const DELETE_BATCH: usize = 500;

/// A Redis server or Cluster (cheap to clone).
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// A standalone server's GET, MGET and SET, on pipelined connections of larder's own (resp.rs says why);
    /// `None` for a cluster.
    pipelined: Option<Connections<Resp>>,
    backend: &'static str,
    /// The server (or the cluster's seeds) as errors name it.
    server: String,
    prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
    /// How to reach a node directly (for SCAN on each master), with the URL's credentials.
    redis_info: RedisConnectionInfo,
    /// A standalone server's failures and ejection (a cluster's nodes fail over on their own: no ejection there).
    health: Health,
    policy: Option<FailurePolicy>,
    /// The longest value read back, and so written (spec/STORES.md §2).
    max_value: usize,
}

impl RedisStore {
    /// Opens `redis://[user:pass@]host:port/db` or `redis+cluster://h1:p1,h2:p2`; connects on first use.
    pub async fn open(mut url: StoreUrl) -> Result<RedisStore, OpenError> {
        let cluster = match url.scheme.as_str() {
            "redis" => false,
            "redis+cluster" => true,
            _ => return Err(url.error("not a redis:// or redis+cluster:// URL").into()),
        };
        let hosts = url.require_hosts()?.to_vec();
        let db = match url.path.trim_start_matches('/') {
            "" => 0,
            text => text
                .parse::<i64>()
                .ok()
                .filter(|n| (0..=1_000_000).contains(n))
                .ok_or_else(|| url.error(format!("the path {:?} must be a database number (/0)", url.path)))?,
        };
        if cluster && db != 0 {
            return Err(url.error("a Redis Cluster has only database 0").into());
        }
        if !cluster && hosts.len() != 1 {
            return Err(url.error("redis:// takes one host; use redis+cluster:// for a Cluster").into());
        }
        let prefix = url.take("prefix").unwrap_or_default();
        let timeout = url.take_duration("timeout", Duration::from_millis(250))?;
        let connect_timeout = url.take_duration("connect_timeout", Duration::from_millis(500))?;
        let pool = url.take_number("pool", 4, 1..=64)? as usize;
        let max_value = url.take_size("max_value", DEFAULT_MAX_VALUE as u64)?;
        let max_value = usize::try_from(max_value).unwrap_or(usize::MAX).clamp(1024, 512 << 20);
        let policy = FailurePolicy::from_url(&mut url, 2, Duration::from_secs(1))?;
        url.finish()?;
        let redis_info = RedisConnectionInfo {
            db,
            username: url.username.clone(),
            password: url.password.clone(),
            ..RedisConnectionInfo::default()
        };
        let info = |h: &larder_store::url::HostPort| ConnectionInfo {
            addr: ConnectionAddr::Tcp(h.host.clone(), h.port.unwrap_or(6379)),
            redis: redis_info.clone(),
        };
        let target =
            if cluster { Target::Cluster(hosts.iter().map(info).collect()) } else { Target::Single(info(&hosts[0])) };
        let server = hosts.iter().map(|h| h.address(6379)).collect::<Vec<_>>().join(",");
        let hosts_named = server.clone();
        let pipelined = (!cluster).then(|| {
            let protocol = Resp { max_value, greeting: greeting(&redis_info) };
            Connections::new(protocol, hosts[0].address(6379), pool)
        });
        Ok(RedisStore {
            inner: Arc::new(Inner {
                pool: Pool::new(target, pool, connect_timeout, timeout, max_value),
                pipelined,
                backend: if cluster { "redis-cluster" } else { "redis" },
                server,
                prefix,
                timeout,
                connect_timeout,
                redis_info,
                health: Health::named(if cluster { "redis-cluster" } else { "redis" }, &hosts_named),
                policy: (!cluster).then_some(policy),
                max_value,
            }),
        })
    }
}

/// What went wrong with a request: for the server's health (`unavailable`: it counts towards ejection) and the
/// caller's error.
struct Trouble {
    unavailable: bool,
    timed_out: bool,
    message: String,
}

impl Inner {
    /// Runs `f` on a connection within the store's bounds, naming the server in any error.
    async fn call<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(Handle) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        self.admit()?;
        let leased = AtomicUsize::new(usize::MAX);
        let work = async {
            let lease = self.pool.get().await?;
            leased.store(lease.slot, Ordering::Relaxed);
            f(lease.handle).await
        };
        let bound = self.timeout + self.connect_timeout;
        let result = match tokio::time::timeout(bound, work).await {
            Ok(Ok(value)) => Ok(value),
            // Only the server's unavailability counts as a failure: an error reply (a script's, say) does not.
            Ok(Err(error)) => Err(Trouble {
                unavailable: error.is_timeout()
                    || error.is_io_error()
                    || error.is_connection_refusal()
                    || error.is_connection_dropped(),
                timed_out: error.is_timeout(),
                message: describe(&error),
            }),
            Err(_) => Err(Trouble {
                unavailable: true,
                timed_out: true,
                message: format!("no answer within {} ms", bound.as_millis()),
            }),
        };
        if result.as_ref().is_err_and(|trouble| trouble.unavailable) {
            // The connection is out of step, dripping, or gone: the next request through its slot connects anew.
            if let Some(slot) = Some(leased.load(Ordering::Relaxed)).filter(|s| *s != usize::MAX) {
                self.pool.discard(slot).await;
            }
        }
        self.settle(result)
    }

    /// Sends one command (GET, MGET, SET) on a standalone server's own pipelined connections, read by larder's
    /// RESP reader (resp.rs); a cluster's go through redis-rs (`call`). An error reply is the caller's error, not
    /// the server's failure.
    async fn single(&self, pipelined: &Connections<Resp>, request: Bytes, expect: Expect) -> Result<Reply, StoreError> {
        // The reader returns exactly the replies `expect` names: one here.
        let replies = self.pipelined(pipelined, request, expect).await?;
        replies.into_iter().next().ok_or_else(|| self.refused("no reply to a command".into()))
    }

    /// Sends commands in one request on the pipelined connections; their replies, in order. An error reply to any
    /// of them is the caller's error (the connection stays in step: every reply was read).
    async fn pipelined(
        &self,
        pipelined: &Connections<Resp>,
        request: Bytes,
        expect: Expect,
    ) -> Result<Vec<Reply>, StoreError> {
        self.admit()?;
        let bound = self.timeout + self.connect_timeout;
        let result = match pipelined.exchange(request, expect, bound, self.connect_timeout).await {
            Ok(replies) => match replies.iter().find_map(|r| if let Reply::Error(e) = r { Some(e) } else { None }) {
                Some(message) => Err(Trouble { unavailable: false, timed_out: false, message: message.clone() }),
                None => Ok(replies),
            },
            Err(failure) => {
                Err(Trouble { unavailable: true, timed_out: failure.is_timeout(), message: explain(&failure.0, false) })
            }
        };
        self.settle(result)
    }

    /// Refuses a request at once while the server is ejected (spec/STORES.md §1).
    fn admit(&self) -> Result<(), StoreError> {
        if self.policy.is_some() && !self.health.admits(larder_format::now_ms()) {
            self.health.count_error();
            return Err(StoreError::Server {
                backend: self.backend,
                server: self.server.clone(),
                message: "ejected after failing; not tried until retry_after has passed".into(),
            });
        }
        Ok(())
    }

    /// Counts a request's outcome against the server's health, and names the server in its error.
    fn settle<T>(&self, result: Result<T, Trouble>) -> Result<T, StoreError> {
        match (&result, self.policy) {
            (Ok(_), Some(_)) => self.health.succeeded(),
            (Err(trouble), Some(policy)) if trouble.unavailable => {
                self.health.failed(&trouble.message, policy, larder_format::now_ms());
            }
            (Err(_), _) => self.health.count_error(),
            (Ok(_), None) => {}
        }
        result.map_err(|trouble| {
            if trouble.timed_out {
                self.timed_out()
            } else {
                StoreError::Server { backend: self.backend, server: self.server.clone(), message: trouble.message }
            }
        })
    }

    /// A reply of the wrong shape for its command: the connection is in step (one reply was read), so it is the
    /// caller's error, counted, not a failure of the server.
    fn unexpected(&self, command: &str, reply: &Reply) -> StoreError {
        self.refused(format!("{command} answered {reply:?}"))
    }

    fn refused(&self, message: String) -> StoreError {
        self.health.count_error();
        StoreError::Server { backend: self.backend, server: self.server.clone(), message }
    }

    fn timed_out(&self) -> StoreError {
        StoreError::Timeout {
            backend: self.backend,
            server: self.server.clone(),
            timeout_ms: self.timeout.as_millis() as u64,
        }
    }

    fn key(&self, key: &str) -> Result<String, StoreError> {
        Ok(stored_key(self.backend, &self.prefix, key)?.into_owned())
    }

    fn keys(&self, keys: &[&str]) -> Result<Vec<String>, StoreError> {
        keys.iter().map(|k| self.key(k)).collect()
    }

    /// Writes entries (and indexes their tags) in one pipeline; `mode_nx` makes it an add (one item).
    async fn write(&self, items: &[(&str, &[u8])], ttl: Option<Duration>, nx: bool) -> Result<bool, StoreError> {
        let now = larder_format::now_ms();
        let mut writes: Vec<Write> = Vec::with_capacity(items.len());
        let mut tagged: Vec<(String, u64, Vec<String>)> = Vec::new();
        for (key, value) in items {
            let stored = self.key(key)?;
            if value.len() > self.max_value {
                return Err(StoreError::TooLarge {
                    backend: self.backend,
                    key: (*key).to_owned(),
                    size: value.len(),
                    limit: self.max_value,
                });
            }
            let expiry = expires_at_ms(value, ttl, now);
            if expiry.is_some_and(|at| at <= now) {
                if nx {
                    return Ok(false);
                }
                writes.push(Write { stored, value: None, expiry: None });
                continue;
            }
            if let Ok((header, _)) = larder_format::Header::parse(value) {
                if !header.tags.is_empty() {
                    let tags = header.tags.iter().map(|t| internal_key(&self.prefix, "tag", t)).collect();
                    tagged.push((stored.clone(), expiry.unwrap_or(0), tags));
                }
            }
            writes.push(Write { stored, value: Some(value), expiry });
        }
        let stored = match &self.pipelined {
            Some(pipelined) => self.write_pipelined(pipelined, &writes, nx).await?,
            None => {
                let commands = writes.iter().map(|w| w.command(nx)).collect();
                let replies = self.run_all(commands).await?;
                !nx || replies.first().is_some_and(|r| !matches!(r, redis::Value::Nil))
            }
        };
        if stored {
            for (member, at, tags) in tagged {
                for tag in tags {
                    let member = member.clone();
                    self.call(|mut c| async move {
                        scripts::TAG.key(tag).arg(member).arg(at).invoke_async::<i64>(&mut c).await
                    })
                    .await?;
                }
            }
        }
        Ok(stored)
    }

    /// The SETs and DELs of a write as one request on a standalone server's pipelined connections (a large value
    /// is copied once, into the request, where redis-rs copied it into a command and again into its pipeline);
    /// whether an add stored its entry.
    async fn write_pipelined(
        &self,
        pipelined: &Connections<Resp>,
        writes: &[Write<'_>],
        nx: bool,
    ) -> Result<bool, StoreError> {
        let bytes = writes.iter().map(|w| w.stored.len() + w.value.map_or(0, <[u8]>::len) + 48).sum();
        let mut request = resp::Request::new(bytes);
        for write in writes {
            write.render(&mut request, nx);
        }
        let replies = self.pipelined(pipelined, request.finish(), Expect::Replies(writes.len())).await?;
        let mut stored = true;
        for (write, reply) in writes.iter().zip(&replies) {
            match (write.value, reply) {
                (Some(_), Reply::Status(ok)) if ok == "OK" => {}
                (Some(_), Reply::Bulk(None)) if nx => stored = false,
                (None, Reply::Integer(_)) => {}
                (Some(_), other) => return Err(self.unexpected("SET", other)),
                (None, other) => return Err(self.unexpected("DEL", other)),
            }
        }
        Ok(stored)
    }

    /// Runs commands in one pipeline on one server; on a Cluster, where a pipeline may not cross slots, all at
    /// once side by side.
    async fn run_all(&self, commands: Vec<redis::Cmd>) -> Result<Vec<redis::Value>, StoreError> {
        if self.backend == "redis" {
            let mut pipe = redis::pipe();
            for command in commands {
                pipe.add_command(command);
            }
            return self.call(|mut c| async move { pipe.query_async(&mut c).await }).await;
        }
        let runs =
            commands.into_iter().map(|command| self.call(|mut c| async move { command.query_async(&mut c).await }));
        futures_util::future::join_all(runs).await.into_iter().collect()
    }

    /// Deletes stored keys in batches; how many existed.
    async fn delete_stored<K: redis::ToRedisArgs + Clone + Send + Sync>(
        &self,
        keys: Vec<K>,
    ) -> Result<usize, StoreError> {
        let mut deleted = 0;
        for chunk in keys.chunks(DELETE_BATCH) {
            let chunk = chunk.to_vec();
            let n: usize = self.call(|mut c| async move { c.del(chunk).await }).await?;
            deleted += n;
        }
        Ok(deleted)
    }

    /// The masters to scan directly: none for one server (scanned through the pool), or the cluster's masters
    /// from `CLUSTER NODES`.
    async fn scan_targets(&self) -> Result<Vec<ConnectionInfo>, StoreError> {
        if self.backend == "redis" {
            return Ok(Vec::new());
        }
        let nodes: String =
            self.call(|mut c| async move { redis::cmd("CLUSTER").arg("NODES").query_async(&mut c).await }).await?;
        Ok(nodes
            .lines()
            .filter_map(|line| {
                let mut fields = line.split(' ');
                let address = fields.nth(1)?;
                let flags = fields.next()?;
                if !flags.split(',').any(|f| f == "master") || flags.contains("fail") {
                    return None;
                }
                let (host, port) = address.split('@').next()?.rsplit_once(':')?;
                Some(ConnectionInfo {
                    addr: ConnectionAddr::Tcp(host.to_owned(), port.parse().ok()?),
                    redis: RedisConnectionInfo { db: 0, ..self.redis_info.clone() },
                })
            })
            .collect())
    }

    /// Every stored key matching `pattern`, from every master.
    async fn scan(&self, pattern: &str) -> Result<Vec<Vec<u8>>, StoreError> {
        let targets = self.scan_targets().await?;
        let mut found = Vec::new();
        if targets.is_empty() {
            let pattern = pattern.to_owned();
            let keys: Vec<Vec<u8>> = self
                .call(|mut c| async move {
                    let mut keys = Vec::new();
                    let mut iter: redis::AsyncIter<Vec<u8>> = c.scan_match(&pattern).await?;
                    while let Some(key) = iter.next_item().await {
                        keys.push(key?);
                    }
                    Ok(keys)
                })
                .await?;
            found.extend(keys);
        } else {
            for info in targets {
                let pattern = pattern.to_owned();
                let keys: Vec<Vec<u8>> = self
                    .call(|_| async move {
                        let mut node =
                            crate::connect::node(&info, self.connect_timeout, self.timeout, self.max_value).await?;
                        let mut keys = Vec::new();
                        let mut iter: redis::AsyncIter<Vec<u8>> = node.scan_match(&pattern).await?;
                        while let Some(key) = iter.next_item().await {
                            keys.push(key?);
                        }
                        Ok(keys)
                    })
                    .await?;
                found.extend(keys);
            }
        }
        Ok(found)
    }
}

/// One key of a write: a SET of `value` (until `expiry`, in Unix ms), or a DEL when the entry has already expired.
struct Write<'a> {
    stored: String,
    value: Option<&'a [u8]>,
    expiry: Option<u64>,
}

impl Write<'_> {
    /// As redis-rs's command (a cluster's writes).
    fn command(&self, nx: bool) -> redis::Cmd {
        let Some(value) = self.value else { return redis::Cmd::del(&self.stored) };
        let mut set = redis::cmd("SET");
        set.arg(&self.stored).arg(value);
        if let Some(at) = self.expiry {
            set.arg("PXAT").arg(at);
        }
        if nx {
            set.arg("NX");
        }
        set
    }

    /// As RESP, into a request of the pipelined connections.
    fn render(&self, request: &mut resp::Request, nx: bool) {
        let Some(value) = self.value else {
            request.command(2).arg(b"DEL").arg(self.stored.as_bytes());
            return;
        };
        let args = 3 + if self.expiry.is_some() { 2 } else { 0 } + usize::from(nx);
        request.command(args).arg(b"SET").arg(self.stored.as_bytes()).arg(value);
        if let Some(at) = self.expiry {
            request.arg(b"PXAT").arg_decimal(at);
        }
        if nx {
            request.arg(b"NX");
        }
    }
}

/// AUTH and SELECT for a new pipelined connection, as redis-rs sends them on its own.
fn greeting(info: &RedisConnectionInfo) -> Vec<Bytes> {
    let mut greeting = Vec::new();
    match (&info.username, &info.password) {
        (Some(user), Some(password)) => greeting.push(resp::command(&[b"AUTH", user.as_bytes(), password.as_bytes()])),
        (None, Some(password)) => greeting.push(resp::command(&[b"AUTH", password.as_bytes()])),
        _ => {}
    }
    if info.db != 0 {
        greeting.push(resp::command(&[b"SELECT", info.db.to_string().as_bytes()]));
    }
    greeting
}

/// What went wrong, in the words an operator needs: a refused connection and a database that does not exist are
/// said as such (redis-rs reports both in its own terms).
fn describe(error: &redis::RedisError) -> String {
    explain(&error.to_string(), error.is_connection_refusal())
}

/// What a failure means to someone who set up the URL, from redis-rs's errors and the read path's alike.
fn explain(text: &str, refused: bool) -> String {
    if refused || text.contains("Connection refused") {
        "connection refused (is redis-server running there?)".into()
    } else if text.contains("DB index is out of range") {
        "the database in the URL's path does not exist on this server (it has `databases` of them, 16 by default)"
            .into()
    } else {
        text.to_owned()
    }
}

/// `prefix` with SCAN's glob characters escaped, then `*`.
fn glob_prefix(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

impl Store for RedisStore {
    fn backend(&self) -> &'static str {
        self.inner.backend
    }

    /// What the store reads back (`max_value`): it never writes a value it would refuse to read.
    fn max_value_bytes(&self) -> usize {
        self.inner.max_value
    }

    fn server_errors(&self) -> Vec<(String, u64)> {
        vec![(self.inner.server.clone(), self.inner.health.errors())]
    }

    fn server_reports(&self) -> Vec<larder_store::ServerReport> {
        vec![self.inner.health.report(&self.inner.server)]
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, StoreError> {
        let stored = self.inner.key(key)?;
        if let Some(pipelined) = &self.inner.pipelined {
            let request = resp::command(&[b"GET", stored.as_bytes()]);
            return match self.inner.single(pipelined, request, Expect::Replies(1)).await? {
                Reply::Bulk(value) => Ok(value.map(Value::from)),
                other => Err(self.inner.unexpected("GET", &other)),
            };
        }
        let value: Option<Vec<u8>> = self.inner.call(|mut c| async move { c.get(stored).await }).await?;
        Ok(value.map(Value::from))
    }

    async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(pipelined) = &self.inner.pipelined {
            // The stored keys go straight into the request (no String per key: a fifth of an MGET's instructions).
            let mut request = resp::Request::new(keys.iter().map(|k| k.len() + 24).sum());
            request.command(keys.len() + 1).arg(b"MGET");
            for key in keys {
                request.arg(stored_key(self.inner.backend, &self.inner.prefix, key)?.as_bytes());
            }
            return match self.inner.single(pipelined, request.finish(), Expect::Values(keys.len())).await? {
                Reply::Values(values) => Ok(values.into_iter().map(|v| v.map(Value::from)).collect()),
                other => Err(self.inner.unexpected("MGET", &other)),
            };
        }
        let stored = self.inner.keys(keys)?;
        let values: Vec<Option<Vec<u8>>> =
            self.inner.call(|mut c| async move { redis::cmd("MGET").arg(&stored).query_async(&mut c).await }).await?;
        Ok(values.into_iter().map(|v| v.map(|v| Value::from(Bytes::from(v)))).collect())
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        self.inner.write(&[(key, value)], ttl, false).await.map(|_| ())
    }

    async fn set_many(&self, items: &[(&str, &[u8])], ttl: Option<Duration>) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        self.inner.write(items, ttl, false).await.map(|_| ())
    }

    async fn add(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        self.inner.write(&[(key, value)], ttl, true).await
    }

    async fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        let stored = self.inner.key(key)?;
        let ttl_ms = ttl.map_or(0, |t| t.as_millis().max(1) as u64);
        let result = self
            .inner
            .call(|mut c| async move {
                scripts::INCR
                    .key(stored)
                    .arg(delta)
                    .arg(u8::from(create))
                    .arg(ttl_ms)
                    .invoke_async::<Option<i64>>(&mut c)
                    .await
            })
            .await;
        match result {
            Err(StoreError::Server { message, .. }) if message.contains("not an integer") => {
                Err(StoreError::NotACounter { backend: self.inner.backend, key: key.to_owned() })
            }
            other => other,
        }
    }

    async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool, StoreError> {
        let stored = self.inner.key(key)?;
        let expected = expected.to_vec();
        let deleted: i64 = self
            .inner
            .call(|mut c| async move { scripts::DELETE_IF.key(stored).arg(expected).invoke_async(&mut c).await })
            .await?;
        Ok(deleted == 1)
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.inner.delete_stored(vec![self.inner.key(key)?]).await? == 1)
    }

    async fn delete_many(&self, keys: &[&str]) -> Result<usize, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        self.inner.delete_stored(self.inner.keys(keys)?).await
    }

    async fn clear(&self) -> Result<(), StoreError> {
        if self.inner.prefix.is_empty() {
            self.inner.call(|mut c| async move { redis::cmd("FLUSHDB").query_async::<()>(&mut c).await }).await
        } else {
            self.purge_prefix("").await.map(|_| ())
        }
    }

    async fn purge_prefix(&self, prefix: &str) -> Result<Purged, StoreError> {
        let pattern = glob_prefix(&stored_prefix(self.inner.backend, &self.inner.prefix, prefix)?);
        let keys = self.inner.scan(&pattern).await?;
        self.inner.delete_stored(keys).await.map(Purged::Removed)
    }

    async fn purge_tag(&self, tag: &str) -> Result<Purged, StoreError> {
        let set = internal_key(&self.inner.prefix, "tag", tag);
        let members: Vec<Vec<u8>> = {
            let set = set.clone();
            self.inner
                .call(|mut c| async move {
                    let mut members = Vec::new();
                    let mut iter: redis::AsyncIter<Vec<u8>> = c.sscan(set).await?;
                    while let Some(member) = iter.next_item().await {
                        members.push(member?);
                    }
                    Ok(members)
                })
                .await?
        };
        let deleted = self.inner.delete_stored(members).await?;
        self.inner.delete_stored(vec![set]).await?;
        Ok(Purged::Removed(deleted))
    }

    async fn stats(&self) -> Result<StoreStats, StoreError> {
        let entries: u64 =
            self.inner.call(|mut c| async move { redis::cmd("DBSIZE").query_async(&mut c).await }).await?;
        let mut stats = StoreStats { entries, ..StoreStats::default() };
        if self.inner.backend == "redis" {
            let info: String =
                self.inner.call(|mut c| async move { redis::cmd("INFO").query_async(&mut c).await }).await?;
            for line in info.lines() {
                let Some((name, value)) = line.trim().split_once(':') else { continue };
                let n: u64 = value.parse().unwrap_or(0);
                match name {
                    "keyspace_hits" => stats.hits = n,
                    "keyspace_misses" => stats.misses = n,
                    "evicted_keys" => stats.evictions = n,
                    "expired_keys" => stats.expirations = n,
                    "used_memory" => stats.bytes = n,
                    "maxmemory" => stats.capacity_bytes = n,
                    _ => {}
                }
            }
        }
        Ok(stats)
    }
}
