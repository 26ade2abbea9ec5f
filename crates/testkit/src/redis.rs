//! redis-server on a loopback port, and a three-master Redis Cluster made with `redis-cli --cluster create`.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{find_binary, free_port, Server, TestkitError};

/// A standalone Redis server with persistence off.
pub struct Redis {
    server: Option<Server>,
    port: u16,
    dir: tempfile::TempDir,
    cluster: bool,
}

impl Redis {
    pub fn start() -> Result<Redis, TestkitError> {
        Redis::start_node(false)
    }

    fn start_node(cluster: bool) -> Result<Redis, TestkitError> {
        let dir = tempfile::tempdir().map_err(|e| TestkitError(format!("redis: temporary directory: {e}")))?;
        let mut redis = Redis { server: None, port: free_port(), dir, cluster };
        let mut attempts = 0;
        loop {
            match redis.launch() {
                Ok(()) => return Ok(redis),
                Err(e) if attempts >= 2 => return Err(e),
                Err(_) => {
                    attempts += 1;
                    redis.port = free_port();
                }
            }
        }
    }

    fn launch(&mut self) -> Result<(), TestkitError> {
        let binary = find_binary("redis-server", "redis-server", &["/usr/bin"])?;
        let mut command = Command::new(binary);
        command.current_dir(self.dir.path());
        command.args(["--bind", "127.0.0.1", "--port", &self.port.to_string(), "--save", "", "--appendonly", "no"]);
        command.args(["--daemonize", "no", "--protected-mode", "no", "--loglevel", "warning"]);
        if self.cluster {
            let config = format!("nodes-{}.conf", self.port);
            command.args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                &config,
                "--cluster-node-timeout",
                "2000",
            ]);
        }
        self.server = Some(Server::spawn("redis-server", command, self.port)?);
        Ok(())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:port/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.stop();
        }
    }

    /// Starts it again on the same port (empty: persistence is off).
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.stop();
        self.launch()
    }

    /// Runs `redis-cli` against this server and returns what it printed.
    pub fn cli(&self, args: &[&str]) -> Result<String, TestkitError> {
        redis_cli(self.port, args)
    }
}

fn redis_cli(port: u16, args: &[&str]) -> Result<String, TestkitError> {
    let binary = find_binary("redis-cli", "redis-tools", &["/usr/bin"])?;
    let output = Command::new(binary)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .map_err(|e| TestkitError(format!("redis-cli: {e}")))?;
    if !output.status.success() {
        return Err(TestkitError(format!(
            "redis-cli {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A Redis Cluster of three masters (no replicas) on loopback, slots spread by `redis-cli --cluster create`.
pub struct RedisCluster {
    nodes: Vec<Redis>,
}

impl RedisCluster {
    pub fn start() -> Result<RedisCluster, TestkitError> {
        let nodes = (0..3).map(|_| Redis::start_node(true)).collect::<Result<Vec<_>, _>>()?;
        let addresses: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let mut args: Vec<&str> = vec!["--cluster", "create"];
        args.extend(addresses.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        redis_cli(nodes[0].port, &args)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        for node in &nodes {
            loop {
                let info = node.cli(&["cluster", "info"])?;
                if info.contains("cluster_state:ok") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(TestkitError(format!("redis cluster not ok within 20 s: {info}")));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(RedisCluster { nodes })
    }

    /// `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    pub fn nodes(&self) -> &[Redis] {
        &self.nodes
    }
}
