//! Connections, made on first use (a store opens with its server down, and connects once it is up): a small pool
//! of multiplexed connections to one server, or of cluster connections. Every socket is larder's own, wrapped in a
//! [`BoundedStream`] before redis-rs sees it, so no reply can make it buffer more than the bounds allow. A
//! connection that failed (an I/O error, a refused reply, a timeout) is dropped from its slot, and the next
//! request through the slot connects anew.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::{ClusterConnection, Connect};
use redis::{AsyncConnectionConfig, Cmd, ConnectionAddr, IntoConnectionInfo, Pipeline, RedisFuture, Value};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::bounded::BoundedStream;

/// The longest value a cluster connection reads. redis-rs makes a cluster's node connections itself through
/// [`Connect`], a trait without a receiver, so the bound cannot travel with each store: it is the largest
/// `max_value` any cluster store of this process was opened with (64 MiB unless one asked for more).
static CLUSTER_MAX_VALUE: AtomicUsize = AtomicUsize::new(0);
/// How long a cluster node connection may take (the cluster client's own timeout is not readable from here).
const CLUSTER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to a server or to a cluster; cheap to clone (clones share the socket).
#[derive(Clone)]
pub enum Handle {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection<BoundedConnection>),
}

impl ConnectionLike for Handle {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Handle::Single(c) => c.req_packed_command(cmd),
            Handle::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Handle::Single(c) => c.req_packed_commands(cmd, offset, count),
            Handle::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Handle::Single(c) => c.get_db(),
            Handle::Cluster(c) => c.get_db(),
        }
    }
}

/// A cluster node's connection, over a bounded socket.
#[derive(Clone)]
pub struct BoundedConnection(MultiplexedConnection);

impl ConnectionLike for BoundedConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

impl Connect for BoundedConnection {
    fn connect_with_config<'a, T>(info: T, config: AsyncConnectionConfig) -> RedisFuture<'a, Self>
    where
        T: IntoConnectionInfo + Send + 'a,
    {
        async move {
            let info = info.into_connection_info()?;
            let max_value = match CLUSTER_MAX_VALUE.load(Ordering::Relaxed) {
                0 => DEFAULT_MAX_VALUE,
                n => n,
            };
            connect(&info, CLUSTER_CONNECT_TIMEOUT, config, max_value).await.map(BoundedConnection)
        }
        .boxed()
    }
}

/// `max_value`'s default (spec/STORES.md §1): the entry format's default decoded-size limit.
pub const DEFAULT_MAX_VALUE: usize = 64 << 20;

/// Connects to one server over a bounded socket and runs redis-rs's handshake (AUTH, SELECT) on it.
async fn connect(
    info: &redis::ConnectionInfo,
    connect_timeout: Duration,
    config: AsyncConnectionConfig,
    max_value: usize,
) -> redis::RedisResult<MultiplexedConnection> {
    let ConnectionAddr::Tcp(host, port) = &info.addr else {
        return Err((redis::ErrorKind::InvalidClientConfig, "only plain TCP connections").into());
    };
    let tcp = tokio::time::timeout(connect_timeout, TcpStream::connect((host.as_str(), *port)))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    tcp.set_nodelay(true)?;
    let stream = BoundedStream::new(tcp, max_value);
    let handshake = MultiplexedConnection::new_with_config(&info.redis, stream, config);
    let (connection, driver) = tokio::time::timeout(connect_timeout, handshake)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "handshake timed out"))??;
    tokio::spawn(driver);
    Ok(connection)
}

/// A connection of its own to one node (a cluster master to SCAN), bounded like the pool's.
pub async fn node(
    info: &redis::ConnectionInfo,
    connect_timeout: Duration,
    timeout: Duration,
    max_value: usize,
) -> redis::RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new().set_connection_timeout(connect_timeout).set_response_timeout(timeout);
    connect(info, connect_timeout, config, max_value).await
}

/// Where and how to connect.
pub enum Target {
    Single(redis::ConnectionInfo),
    Cluster(Vec<redis::ConnectionInfo>),
}

pub struct Pool {
    target: Target,
    slots: Box<[Mutex<Option<Handle>>]>,
    next: AtomicUsize,
    connect_timeout: Duration,
    timeout: Duration,
    max_value: usize,
}

/// A pooled connection and the slot it came from (to drop it if it fails).
pub struct Lease {
    pub handle: Handle,
    pub slot: usize,
}

impl Pool {
    pub fn new(target: Target, size: usize, connect_timeout: Duration, timeout: Duration, max_value: usize) -> Pool {
        if matches!(target, Target::Cluster(_)) {
            CLUSTER_MAX_VALUE.fetch_max(max_value, Ordering::Relaxed);
        }
        Pool {
            target,
            slots: (0..size.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            connect_timeout,
            timeout,
            max_value,
        }
    }

    /// A connection, made now if this slot has none.
    pub async fn get(&self) -> redis::RedisResult<Lease> {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[index].lock().await;
        if let Some(handle) = slot.as_ref() {
            return Ok(Lease { handle: handle.clone(), slot: index });
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(self.connect_timeout)
            .set_response_timeout(self.timeout);
        let handle = match &self.target {
            Target::Single(info) => Handle::Single(connect(info, self.connect_timeout, config, self.max_value).await?),
            Target::Cluster(seeds) => {
                let client = ClusterClient::builder(seeds.clone())
                    .connection_timeout(self.connect_timeout)
                    .response_timeout(self.timeout)
                    .retries(1)
                    .build()?;
                Handle::Cluster(client.get_async_generic_connection::<BoundedConnection>().await?)
            }
        };
        *slot = Some(handle.clone());
        Ok(Lease { handle, slot: index })
    }

    /// Forgets a standalone server's connection that failed, so the next request through its slot reconnects (a
    /// cluster connection reconnects its nodes by itself).
    pub async fn discard(&self, slot: usize) {
        if let Target::Single(_) = self.target {
            if let Some(slot) = self.slots.get(slot) {
                *slot.lock().await = None;
            }
        }
    }
}
