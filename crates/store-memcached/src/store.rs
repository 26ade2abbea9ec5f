//! `MemcachedStore`: the URL's options, routing keys to servers over the ring (rebuilt when a server is ejected or
//! readmitted), and the `Store` operations as batches of meta commands.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::join_all;
use larder_store::expiry::{expires_at_ms, memcached_exptime};
use larder_store::keys::{check_prefix, stored_key};
use larder_store::{FailurePolicy, OpenError, Purged, Store, StoreError, StoreStats, StoreUrl, Value};
use parking_lot::RwLock;

use crate::protocol::{self, Reply};
use crate::ring::{Ring, RingServer};
use crate::server::{Expect, Failure, Server};

const BACKEND: &str = "memcached";

/// Items (indexes of a request's keys) grouped by the index of the server they go to.
type Groups = Vec<(usize, Vec<usize>)>;
/// memcached's per-item overhead (48-byte header + CAS) that counts against its item size.
const ITEM_OVERHEAD: usize = 56;

/// A pool of memcached servers (cheap to clone; clones share connections).
#[derive(Clone)]
pub struct MemcachedStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    servers: Vec<Server>,
    ring_servers: Vec<RingServer>,
    ring: RwLock<Arc<Ring>>,
    next_readmit_check: AtomicU64,
    pub(crate) prefix: String,
    timeout: Duration,
    connect_timeout: Duration,
    policy: FailurePolicy,
    max_item: usize,
    pub(crate) prefix_purge: bool,
    /// Where the prefix purges are listed (§4.4), read with every get: hashed once here, not per read (it was a
    /// tenth of a remote hit's instructions).
    pub(crate) prefix_list_key: String,
    pub(crate) purge_skew_ms: u64,
    pub(crate) purge_retention_ms: u64,
}

impl MemcachedStore {
    /// Opens `memcached://h1:11211,h2:11211?…`; no server is contacted until the first request.
    pub async fn open(mut url: StoreUrl) -> Result<MemcachedStore, OpenError> {
        if url.scheme != "memcached" {
            return Err(url.error("not a memcached:// URL").into());
        }
        if !url.path.is_empty() && url.path != "/" {
            return Err(url.error("memcached:// takes no path").into());
        }
        let hosts = url.require_hosts()?.to_vec();
        let prefix = url.take("prefix").unwrap_or_default();
        let timeout = url.take_duration("timeout", Duration::from_millis(250))?;
        let connect_timeout = url.take_duration("connect_timeout", Duration::from_millis(500))?;
        let pool = url.take_number("pool", 2, 1..=64)? as usize;
        let policy = FailurePolicy::from_url(&mut url, 2, Duration::from_secs(5))?;
        let max_item = url.take_size("max_item", 1 << 20)? as usize;
        let prefix_purge = url.take_bool("prefix_purge", true)?;
        let purge_skew_ms = url.take_duration("purge_skew", Duration::from_secs(1))?.as_millis() as u64;
        let purge_retention_ms =
            url.take_duration("purge_retention", Duration::from_secs(30 * 86_400))?.as_millis() as u64;
        let weights: Vec<u32> = match url.take("weights") {
            None => vec![1; hosts.len()],
            Some(text) => text
                .split(',')
                .map(|w| w.trim().parse::<u32>().ok().filter(|w| *w > 0))
                .collect::<Option<Vec<u32>>>()
                .filter(|w| w.len() == hosts.len())
                .ok_or_else(|| url.error(format!("weights={text:?}: one whole number > 0 per host, in order")))?,
        };
        url.finish()?;
        if max_item <= ITEM_OVERHEAD + 250 {
            return Err(url.error("max_item is too small").into());
        }
        let ring_servers: Vec<RingServer> = hosts
            .iter()
            .zip(&weights)
            .map(|(h, &weight)| RingServer {
                host: if h.host.contains(':') { format!("[{}]", h.host) } else { h.host.clone() },
                port: h.port.unwrap_or(11211),
                weight,
            })
            .collect();
        let servers = hosts
            .iter()
            .map(|h| {
                let address = h.address(11211);
                Server::new(address.clone(), address, pool, max_item + 1024)
            })
            .collect();
        let ring = Ring::build(&ring_servers, |_| true);
        Ok(MemcachedStore {
            inner: Arc::new(Inner {
                prefix_list_key: crate::purge::prefix_list_key(&prefix),
                servers,
                ring_servers,
                ring: RwLock::new(Arc::new(ring)),
                next_readmit_check: AtomicU64::new(0),
                prefix,
                timeout,
                connect_timeout,
                policy,
                max_item,
                prefix_purge,
                purge_skew_ms,
                purge_retention_ms,
            }),
        })
    }

    /// The server a stored key goes to now (for tests and tools).
    pub fn server_of(&self, key: &str) -> Option<String> {
        let stored = stored_key(BACKEND, &self.inner.prefix, key).ok()?;
        self.inner.route(&stored).ok().map(|i| self.inner.servers[i].name.clone())
    }
}

impl Inner {
    /// The server index for a stored key, putting servers whose ejection is over back on the ring first.
    fn route(&self, stored: &str) -> Result<usize, StoreError> {
        let now = larder_format::now_ms();
        if now >= self.next_readmit_check.load(Ordering::Relaxed) {
            self.next_readmit_check.store(now + 100, Ordering::Relaxed);
            let mut changed = false;
            for server in &self.servers {
                changed |= server.health.readmit_if_due(now);
            }
            if changed {
                self.rebuild();
            }
        }
        self.ring.read().server_for(stored).ok_or_else(|| StoreError::Server {
            backend: BACKEND,
            server: self.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(","),
            message: "every server is ejected after failures; retrying after retry_after".into(),
        })
    }

    fn rebuild(&self) {
        let ring = Ring::build(&self.ring_servers, |i| !self.servers[i].health.is_ejected());
        *self.ring.write() = Arc::new(ring);
    }

    fn error(&self, server: &Server, failure: Failure) -> StoreError {
        if failure.is_timeout() {
            StoreError::Timeout {
                backend: BACKEND,
                server: server.name.clone(),
                timeout_ms: self.timeout.as_millis() as u64,
            }
        } else {
            StoreError::Server { backend: BACKEND, server: server.name.clone(), message: failure.0 }
        }
    }

    /// A request about one key to its server, and its replies: `batched`'s rule for a batch of one (a failure that
    /// ejects the server is retried once on the key's new server).
    async fn exchange(&self, route_key: &str, request: impl AsRef<[u8]>) -> Result<Vec<Reply>, StoreError> {
        let request = request.as_ref();
        let replies = self.batched(&[route_key], |_, out| out.extend_from_slice(request)).await?;
        Ok(replies.into_iter().map(|(_, reply)| reply).collect())
    }

    /// Server-level error in a reply.
    fn reply_error(&self, route_key: &str, message: String) -> StoreError {
        let server = self.route(route_key).map(|i| self.servers[i].name.clone()).unwrap_or_default();
        StoreError::Server { backend: BACKEND, server, message }
    }

    /// Items grouped by the server each one's stored key routes to, in the order the servers first appear. A list
    /// searched in place of a map: a pool has a handful of servers, and a hit (one group) then hashes nothing.
    fn group(&self, routes: &[&str], items: impl IntoIterator<Item = usize>) -> Result<Groups, StoreError> {
        let mut groups: Groups = Vec::new();
        for i in items {
            let server = self.route(routes[i])?;
            match groups.iter_mut().find(|(s, _)| *s == server) {
                Some((_, group)) => group.push(i),
                None => groups.push((server, vec![i])),
            }
        }
        Ok(groups)
    }

    /// Each group's batch sent, servers in parallel (one group, the usual case, is awaited as it is).
    async fn send_groups(
        &self,
        mut groups: Groups,
        request: &(impl Fn(&[usize], &mut Vec<u8>) + Sync),
    ) -> Vec<Result<Vec<(usize, Reply)>, (StoreError, Vec<usize>, bool)>> {
        if groups.len() == 1 {
            if let Some((server, items)) = groups.pop() {
                return vec![self.send_batch(server, items, request).await];
            }
        }
        join_all(groups.into_iter().map(|(server, items)| self.send_batch(server, items, request))).await
    }

    /// One batch of items to one server: each item's reply, or the error, the items and whether it ejected the server.
    /// `request` writes the batch's commands, one reply each (the connection's write ends with an `mn`, server.rs).
    async fn send_batch(
        &self,
        index: usize,
        items: Vec<usize>,
        request: &(impl Fn(&[usize], &mut Vec<u8>) + Sync),
    ) -> Result<Vec<(usize, Reply)>, (StoreError, Vec<usize>, bool)> {
        let server = &self.servers[index];
        if !server.health.admits(larder_format::now_ms()) {
            // On probation with its probe still out (spec/STORES.md §1): fail at once rather than wait on a server
            // that may still be frozen; not a failure of its own, so no retry elsewhere.
            server.health.count_error();
            let message = "on probation after an ejection, its one probe still out".to_owned();
            return Err((StoreError::Server { backend: BACKEND, server: server.name.clone(), message }, items, false));
        }
        let mut bytes = Vec::new();
        request(&items, &mut bytes);
        let bytes = Bytes::from(bytes);
        match server.exchange(bytes, Expect::Count(items.len()), self.timeout, self.connect_timeout).await {
            Ok(replies) => {
                server.health.succeeded();
                Ok(items.into_iter().zip(replies).collect())
            }
            Err(failure) => {
                let ejected = server.health.failed(&failure.0, self.policy, larder_format::now_ms());
                if ejected {
                    self.rebuild();
                }
                Err((self.error(server, failure), items, ejected))
            }
        }
    }

    /// Several items in one round trip per server, servers in parallel; each item is routed by `routes[i]` and
    /// `request` writes the commands for a group of items, one reply each. A batch whose failure ejects its server
    /// is retried once, its items regrouped on the rebuilt ring (STORES.md §4.3: on each key's new server, which
    /// for the keys of one ejected server are often several servers: sending them all to the first key's new
    /// server would read false misses and write values, deletes included, where no reader looks).
    async fn batched(
        &self,
        routes: &[&str],
        request: impl Fn(&[usize], &mut Vec<u8>) + Sync,
    ) -> Result<Vec<(usize, Reply)>, StoreError> {
        let groups = self.group(routes, 0..routes.len())?;
        let request = &request;
        let first = self.send_groups(groups, request).await;
        let mut replies = Vec::with_capacity(routes.len());
        let mut retry = Vec::new();
        let mut ejection = None;
        for outcome in first {
            match outcome {
                Ok(mut pairs) => replies.append(&mut pairs),
                Err((error, items, true)) => {
                    retry.extend(items);
                    ejection.get_or_insert(error);
                }
                Err((error, _, false)) => return Err(error),
            }
        }
        if let Some(ejection) = ejection {
            // With every server ejected there is no new owner: the failure that ejected the last one is the answer.
            let groups = self.group(routes, retry).map_err(|_| ejection)?;
            let second = self.send_groups(groups, request).await;
            for outcome in second {
                match outcome {
                    Ok(mut pairs) => replies.append(&mut pairs),
                    Err((error, _, _)) => return Err(error),
                }
            }
        }
        Ok(replies)
    }

    /// Values for stored keys, one round trip per server, servers in parallel.
    pub(crate) async fn get_stored(&self, keys: &[&str]) -> Result<Vec<Option<Bytes>>, StoreError> {
        // Without `q`, every key gets its own reply (a value or `EN`) in the order asked, so replies pair with keys
        // by position: no key echoed back, no map to build.
        let replies = self
            .batched(keys, |items, request| {
                request.reserve(items.len() * 64);
                for &i in items {
                    protocol::get(request, keys[i], "");
                }
            })
            .await?;
        let mut values = vec![None; keys.len()];
        for (i, reply) in replies {
            match reply {
                Reply::Value { data, .. } => values[i] = Some(data),
                Reply::Miss => {}
                Reply::Error(message) => return Err(self.reply_error(keys[i], message)),
                other => return Err(self.reply_error(keys[i], format!("unexpected reply {other:?}"))),
            }
        }
        Ok(values)
    }

    /// Values for the callers' `keys`, read under `asked` (their stored keys, then the prefix-purge list's key), in
    /// one round trip per server; the list is asked for only when prefix purges are on, and the entries a purge
    /// record covers are dropped.
    async fn get_unpurged(&self, keys: &[&str], asked: &[&str]) -> Result<Vec<Option<Bytes>>, StoreError> {
        let asked = if self.prefix_purge { asked } else { &asked[..keys.len()] };
        let mut values = self.get_stored(asked).await?;
        let list = if self.prefix_purge { values.pop().flatten() } else { None };
        self.drop_purged(keys, values, list).await
    }

    /// Writes under stored keys with their exptimes; one batch per server.
    async fn set_stored(&self, items: &[(String, &[u8], i64)], mode: &str) -> Result<Vec<bool>, StoreError> {
        let routes: Vec<&str> = items.iter().map(|(key, _, _)| key.as_str()).collect();
        let replies = self
            .batched(&routes, |batch, request| {
                for &i in batch {
                    let (key, value, exptime) = &items[i];
                    if *exptime < 0 {
                        protocol::delete(request, key, "");
                    } else {
                        protocol::set(request, key, value, *exptime, mode);
                    }
                }
            })
            .await?;
        let mut results = vec![false; items.len()];
        for (i, reply) in replies {
            let expired = items[i].2 < 0;
            match reply {
                Reply::Done | Reply::NotFound if expired => {}
                Reply::Done => results[i] = true,
                Reply::NotStored => {}
                Reply::Error(message) => return Err(self.reply_error(routes[i], message)),
                other => return Err(self.reply_error(routes[i], format!("unexpected reply {other:?}"))),
            }
        }
        Ok(results)
    }

    fn check_size(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        if value.len() + key.len() + ITEM_OVERHEAD > self.max_item {
            return Err(StoreError::TooLarge {
                backend: BACKEND,
                key: key.to_owned(),
                size: value.len(),
                limit: self.max_value_bytes(),
            });
        }
        Ok(())
    }

    pub(crate) fn max_value_bytes(&self) -> usize {
        self.max_item - ITEM_OVERHEAD - larder_format::key::MAX_KEY_LEN
    }

    /// Deletes stored keys; how many were present.
    async fn delete_stored(&self, keys: &[&str]) -> Result<usize, StoreError> {
        let replies = self
            .batched(keys, |batch, request| {
                for &i in batch {
                    protocol::delete(request, keys[i], "");
                }
            })
            .await?;
        Ok(replies.iter().filter(|(_, r)| matches!(r, Reply::Done)).count())
    }

    /// Runs `request` on every server on the ring.
    async fn on_every_server(&self, request: Bytes) -> Result<Vec<Vec<Reply>>, StoreError> {
        let batches = self.servers.iter().filter(|s| !s.health.is_ejected()).map(|server| {
            let request = request.clone();
            async move {
                let result = server.exchange(request, Expect::UntilEndOrOne, self.timeout, self.connect_timeout).await;
                match &result {
                    Ok(_) => server.health.succeeded(),
                    Err(failure) => {
                        server.health.failed(&failure.0, self.policy, larder_format::now_ms());
                    }
                }
                result.map_err(|failure| self.error(server, failure))
            }
        });
        join_all(batches).await.into_iter().collect()
    }

    /// A value under a stored key with its CAS.
    pub(crate) async fn get_with_cas(&self, stored: &str) -> Result<Option<(Bytes, u64)>, StoreError> {
        let mut request = Vec::new();
        protocol::get(&mut request, stored, "c");
        match self.exchange(stored, request).await?.pop() {
            Some(Reply::Value { data, cas: Some(cas), .. }) => Ok(Some((data, cas))),
            Some(Reply::Miss) => Ok(None),
            other => Err(self.reply_error(stored, format!("unexpected reply {other:?}"))),
        }
    }

    /// `ms` with a mode/CAS flag; `true` when stored.
    pub(crate) async fn set_with(
        &self,
        stored: &str,
        value: &[u8],
        exptime: i64,
        flags: &str,
    ) -> Result<bool, StoreError> {
        let mut request = Vec::new();
        protocol::set(&mut request, stored, value, exptime, flags);
        match self.exchange(stored, request).await?.pop() {
            Some(Reply::Done) => Ok(true),
            Some(Reply::NotStored | Reply::Exists | Reply::NotFound) => Ok(false),
            Some(Reply::Error(message)) => Err(self.reply_error(stored, message)),
            other => Err(self.reply_error(stored, format!("unexpected reply {other:?}"))),
        }
    }
}

impl Store for MemcachedStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn max_value_bytes(&self) -> usize {
        self.inner.max_value_bytes()
    }

    fn server_errors(&self) -> Vec<(String, u64)> {
        self.inner.servers.iter().map(|s| (s.name.clone(), s.health.errors())).collect()
    }

    fn server_reports(&self) -> Vec<larder_store::ServerReport> {
        self.inner.servers.iter().map(|s| s.health.report(&s.name)).collect()
    }

    /// `get_many` of one key without its vectors (the stored key borrowed, the two keys asked as an array): the
    /// front's every remote hit comes through here.
    async fn get(&self, key: &str) -> Result<Option<Value>, StoreError> {
        let inner = &self.inner;
        let stored = stored_key(BACKEND, &inner.prefix, key)?;
        let asked = [stored.as_ref(), inner.prefix_list_key.as_str()];
        Ok(inner.get_unpurged(&[key], &asked).await?.pop().flatten().map(Value::from))
    }

    async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<Value>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let inner = &self.inner;
        let stored: Vec<String> = keys
            .iter()
            .map(|k| stored_key(BACKEND, &inner.prefix, k).map(Cow::into_owned))
            .collect::<Result<_, _>>()?;
        let mut asked: Vec<&str> = stored.iter().map(String::as_str).collect();
        asked.push(inner.prefix_list_key.as_str());
        let values = inner.get_unpurged(keys, &asked).await?;
        Ok(values.into_iter().map(|v| v.map(Value::from)).collect())
    }

    async fn set(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<(), StoreError> {
        self.set_many(&[(key, value)], ttl).await
    }

    async fn set_many(&self, items: &[(&str, &[u8])], ttl: Option<Duration>) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        let inner = &self.inner;
        let now = larder_format::now_ms();
        let mut batch = Vec::with_capacity(items.len());
        for (key, value) in items {
            let stored = stored_key(BACKEND, &inner.prefix, key)?.into_owned();
            inner.check_size(&stored, value)?;
            let exptime = memcached_exptime(expires_at_ms(value, ttl, now), now);
            batch.push((stored, *value, exptime));
        }
        inner.set_stored(&batch, "").await.map(|_| ())
    }

    async fn add(&self, key: &str, value: &[u8], ttl: Option<Duration>) -> Result<bool, StoreError> {
        let inner = &self.inner;
        let stored = stored_key(BACKEND, &inner.prefix, key)?.into_owned();
        inner.check_size(&stored, value)?;
        let now = larder_format::now_ms();
        let exptime = memcached_exptime(expires_at_ms(value, ttl, now), now);
        if exptime < 0 {
            return Ok(false);
        }
        inner.set_with(&stored, value, exptime, "ME").await
    }

    async fn incr(
        &self,
        key: &str,
        delta: i64,
        ttl: Option<Duration>,
        create: bool,
    ) -> Result<Option<i64>, StoreError> {
        let inner = &self.inner;
        let stored = stored_key(BACKEND, &inner.prefix, key)?.into_owned();
        let mode = if delta < 0 { "MD" } else { "MI" };
        let mut request = format!("ma {stored} v D{} {mode}", delta.unsigned_abs());
        if create {
            let now = larder_format::now_ms();
            let exptime = memcached_exptime(ttl.map(|t| now + t.as_millis() as u64), now).max(0);
            request.push_str(&format!(" N{exptime} J{}", delta.max(0)));
        }
        request.push_str("\r\n");
        match inner.exchange(&stored, request).await?.pop() {
            Some(Reply::Value { data, .. }) => {
                let text = String::from_utf8_lossy(&data).into_owned();
                let value: u64 =
                    text.trim().parse().map_err(|_| inner.reply_error(&stored, format!("counter {text:?}")))?;
                Ok(Some(i64::try_from(value).unwrap_or(i64::MAX)))
            }
            Some(Reply::NotFound | Reply::Miss) => Ok(None),
            Some(Reply::Error(message)) if message.contains("non-numeric") => {
                Err(StoreError::NotACounter { backend: BACKEND, key: key.to_owned() })
            }
            Some(Reply::Error(message)) => Err(inner.reply_error(&stored, message)),
            other => Err(inner.reply_error(&stored, format!("unexpected reply {other:?}"))),
        }
    }

    async fn delete_if(&self, key: &str, expected: &[u8]) -> Result<bool, StoreError> {
        let inner = &self.inner;
        let stored = stored_key(BACKEND, &inner.prefix, key)?.into_owned();
        let Some((data, cas)) = inner.get_with_cas(&stored).await? else { return Ok(false) };
        if data != expected {
            return Ok(false);
        }
        let mut request = Vec::new();
        protocol::delete(&mut request, &stored, &format!("C{cas}"));
        Ok(matches!(inner.exchange(&stored, request).await?.pop(), Some(Reply::Done)))
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.delete_many(&[key]).await? == 1)
    }

    async fn delete_many(&self, keys: &[&str]) -> Result<usize, StoreError> {
        let inner = &self.inner;
        let stored: Vec<String> = keys
            .iter()
            .map(|k| stored_key(BACKEND, &inner.prefix, k).map(Cow::into_owned))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&str> = stored.iter().map(String::as_str).collect();
        if refs.is_empty() {
            return Ok(0);
        }
        inner.delete_stored(&refs).await
    }

    async fn clear(&self) -> Result<(), StoreError> {
        if self.inner.prefix.is_empty() {
            self.inner.on_every_server(Bytes::from_static(b"flush_all\r\n")).await.map(|_| ())
        } else {
            self.purge_prefix("").await.map(|_| ())
        }
    }

    async fn purge_prefix(&self, prefix: &str) -> Result<Purged, StoreError> {
        check_prefix(BACKEND, prefix)?;
        self.inner.record_prefix_purge(prefix).await?;
        Ok(Purged::Recorded)
    }

    async fn purge_tag(&self, tag: &str) -> Result<Purged, StoreError> {
        self.inner.record_tag_purge(tag).await?;
        Ok(Purged::Recorded)
    }

    async fn stats(&self) -> Result<StoreStats, StoreError> {
        let mut stats = StoreStats::default();
        for replies in self.inner.on_every_server(Bytes::from_static(b"stats\r\n")).await? {
            for reply in replies {
                if let Reply::Stat(name, value) = reply {
                    let n: u64 = value.parse().unwrap_or(0);
                    match name.as_str() {
                        "get_hits" => stats.hits += n,
                        "get_misses" => stats.misses += n,
                        "total_items" => stats.inserts += n,
                        "evictions" => stats.evictions += n,
                        "expired_unfetched" => stats.expirations += n,
                        "curr_items" => stats.entries += n,
                        "bytes" => stats.bytes += n,
                        "limit_maxbytes" => stats.capacity_bytes += n,
                        _ => {}
                    }
                }
            }
        }
        Ok(stats)
    }
}
