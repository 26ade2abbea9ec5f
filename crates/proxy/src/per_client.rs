//! A cap on the connections one client address may hold on a listener (the admin API's), so that one address
//! opening hundreds of connections that idle (issue 32: 600 of them held an operator's authorised purge for 17 s)
//! cannot take every slot. A connection past the cap is answered `503` at once, without reading its request, and
//! closed: the answer is written with one non-blocking write into the fresh socket's empty send buffer, so a flood
//! of refused connections costs no task, no wait and no file descriptor beyond the moment of refusal.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::net::TcpStream;

/// How many connections each client address holds, and the most it may.
#[derive(Clone)]
pub struct PerClient {
    limit: usize,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection's place in its address's count, given back when dropped.
pub struct Share {
    ip: IpAddr,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerClient {
    pub fn new(limit: usize) -> PerClient {
        PerClient { limit: limit.max(1), held: Arc::new(Mutex::new(HashMap::new())) }
    }

    /// A share for a new connection from `ip`, or `None` when the address already holds `limit`.
    pub fn admit(&self, ip: IpAddr) -> Option<Share> {
        let ip = canonical(ip);
        let mut held = self.held.lock();
        let count = held.entry(ip).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(Share { ip, held: self.held.clone() })
    }

    /// Answers a connection refused by [`PerClient::admit`] (the caller then drops it, which closes it).
    pub fn refuse(&self, stream: &TcpStream, ip: IpAddr) {
        let body = format!(
            "{{\"error\":\"{} already holds {} admin API connections (limits.admin_connections_per_client)\"}}",
            canonical(ip),
            self.limit
        );
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\nretry-after: 1\r\n\r\n{body}",
            body.len()
        );
        // Best effort: a fresh socket's send buffer takes this whole; if it does not, the close says enough.
        let _ = stream.try_write(answer.as_bytes());
        tracing::debug!(client = %ip, limit = self.limit, "admin API connection refused: too many from one address");
    }

    #[cfg(test)]
    fn held(&self, ip: IpAddr) -> usize {
        self.held.lock().get(&canonical(ip)).copied().unwrap_or(0)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.held.lock();
        if let Some(count) = held.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// An IPv4 client seen through an IPv6 socket (`::ffff:192.0.2.7`) counts as its IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_holds_at_most_its_limit_and_gets_shares_back() {
        let cap = PerClient::new(2);
        let a: IpAddr = "192.0.2.7".parse().expect("ip");
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("ip");
        let b: IpAddr = "192.0.2.8".parse().expect("ip");
        let first = cap.admit(a).expect("first");
        let second = cap.admit(mapped).expect("second, the same address through IPv6");
        assert!(cap.admit(a).is_none(), "a third from one address");
        assert!(cap.admit(b).is_some(), "another address is not affected");
        drop(first);
        assert_eq!(cap.held(a), 1);
        let third = cap.admit(a).expect("a freed share is given again");
        drop((second, third));
        assert_eq!(cap.held(a), 0);
        assert!(cap.held.lock().is_empty(), "no entry is kept for an address without connections");
    }
}
