//! memcached on a loopback port.

use std::process::Command;

use crate::process::{find_binary, free_port, Server, TestkitError};

/// A memcached server. [`Memcached::stop`] and [`Memcached::restart`] (same port) drive failure drills.
pub struct Memcached {
    server: Option<Server>,
    port: u16,
    memory_mb: u32,
}

impl Memcached {
    /// memcached with 64 MB of memory.
    pub fn start() -> Result<Memcached, TestkitError> {
        Memcached::with_memory(64)
    }

    pub fn with_memory(memory_mb: u32) -> Result<Memcached, TestkitError> {
        let mut last = None;
        for _ in 0..3 {
            let port = free_port();
            let mut memcached = Memcached { server: None, port, memory_mb };
            match memcached.launch() {
                Ok(()) => return Ok(memcached),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| TestkitError("memcached did not start".into())))
    }

    fn launch(&mut self) -> Result<(), TestkitError> {
        let binary = find_binary("memcached", "memcached", &["/usr/bin", "/usr/sbin"])?;
        let mut command = Command::new(binary);
        command.args(["-l", "127.0.0.1", "-p", &self.port.to_string(), "-U", "0", "-m", &self.memory_mb.to_string()]);
        command.args(["-c", "4096", "-t", "2"]);
        // memcached refuses to run as root unless told which user to be.
        command.args(["-u", "root"]);
        self.server = Some(Server::spawn("memcached", command, self.port)?);
        Ok(())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the server (its items are lost, as when a real server dies).
    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.stop();
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.stop();
        self.launch()
    }
}
