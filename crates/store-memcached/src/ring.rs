//! Server selection (spec/STORES.md §4.2): classic ketama, as libmemcached and twemproxy compute it, so every
//! language sends a key to the same server. 160 points per server (weighted), four per MD5 digest of
//! `host-n` (`host:port-n` off the default port); a key goes to the first point at or after the little-endian u32
//! of its MD5. A ring can be built over a subset of the servers, for failover.

use md5::{Digest, Md5};

const POINTS_PER_SERVER: f64 = 160.0;

/// One server as the ring sees it.
#[derive(Debug, Clone)]
pub struct RingServer {
    /// The host exactly as written in the URL (an IPv6 address in brackets).
    pub host: String,
    pub port: u16,
    pub weight: u32,
}

/// The continuum: sorted points, each naming a server by its index in the full list.
#[derive(Debug, Default)]
pub struct Ring {
    points: Vec<(u32, usize)>,
    /// The only server on the ring, when there is one: every key goes to it, with no hash to compute.
    only: Option<usize>,
}

impl Ring {
    /// The ring over the servers for which `alive(index)` holds (weights shared among them).
    pub fn build(servers: &[RingServer], alive: impl Fn(usize) -> bool) -> Ring {
        let members: Vec<usize> = (0..servers.len()).filter(|&i| alive(i)).collect();
        let total: u64 = members.iter().map(|&i| u64::from(servers[i].weight)).sum();
        let mut points = Vec::new();
        if total == 0 {
            return Ring { points, only: None };
        }
        for &index in &members {
            let server = &servers[index];
            let share = f64::from(server.weight) / total as f64;
            let count = ((share * POINTS_PER_SERVER / 4.0 * members.len() as f64 + 1e-10).floor() as usize) * 4;
            for n in 0..count / 4 {
                let name = if server.port == 11211 {
                    format!("{}-{n}", server.host)
                } else {
                    format!("{}:{}-{n}", server.host, server.port)
                };
                let digest = Md5::digest(name.as_bytes());
                for x in 0..4 {
                    let bytes = [digest[4 * x], digest[4 * x + 1], digest[4 * x + 2], digest[4 * x + 3]];
                    points.push((u32::from_le_bytes(bytes), index));
                }
            }
        }
        points.sort_unstable();
        let only = if members.len() == 1 { Some(members[0]) } else { None };
        Ring { points, only }
    }

    /// The server index for `key`, or `None` when the ring is empty.
    pub fn server_for(&self, key: &str) -> Option<usize> {
        let first = self.points.first()?;
        if self.only.is_some() {
            return self.only;
        }
        let hash = key_hash(key);
        let at = self.points.partition_point(|&(point, _)| point < hash);
        Some(self.points.get(at).unwrap_or(first).1)
    }

    pub fn points(&self) -> &[(u32, usize)] {
        &self.points
    }
}

/// The u32 little-endian of the first four bytes of the key's MD5.
pub fn key_hash(key: &str) -> u32 {
    let digest = Md5::digest(key.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}
