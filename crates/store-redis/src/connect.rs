//! Connections, made on first use (a store opens with its server down, and connects once it is up): a small pool
//! of multiplexed connections to one server, or of cluster connections, each reconnecting by itself afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tokio::sync::Mutex;

/// A connection to a server or to a cluster; cheap to clone (clones share the socket).
#[derive(Clone)]
pub enum Handle {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
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
}

impl Pool {
    pub fn new(target: Target, size: usize, connect_timeout: Duration, timeout: Duration) -> Pool {
        Pool {
            target,
            slots: (0..size.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            connect_timeout,
            timeout,
        }
    }

    /// A connection, made now if this slot has none yet.
    pub async fn get(&self) -> redis::RedisResult<Handle> {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[index].lock().await;
        if let Some(handle) = slot.as_ref() {
            return Ok(handle.clone());
        }
        let handle = match &self.target {
            Target::Single(info) => {
                let client = redis::Client::open(info.clone())?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(self.connect_timeout)
                    .set_response_timeout(self.timeout)
                    .set_number_of_retries(1);
                Handle::Single(ConnectionManager::new_with_config(client, config).await?)
            }
            Target::Cluster(seeds) => {
                let client = ClusterClient::builder(seeds.clone())
                    .connection_timeout(self.connect_timeout)
                    .response_timeout(self.timeout)
                    .retries(1)
                    .build()?;
                Handle::Cluster(client.get_async_connection().await?)
            }
        };
        *slot = Some(handle.clone());
        Ok(handle)
    }
}
