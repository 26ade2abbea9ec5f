//! Starts one of every shared store on loopback (memcached, Redis, a three-master Redis Cluster, PostgreSQL, plus
//! a SQLite file and a file store in a temporary directory), prints one store URL per line, and keeps them up until
//! its standard input closes. bench/store-latency.sh uses it to measure every store with `larder bench stores`;
//! the servers are larder-testkit's, started exactly as the store tests start them.

use std::io::Read;

use larder_testkit::{Memcached, Postgres, Redis, RedisCluster};

fn main() {
    if let Err(message) = run() {
        eprintln!("serve_stores: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let memcached = Memcached::with_memory(1024).map_err(|e| e.to_string())?;
    let redis = Redis::start().map_err(|e| e.to_string())?;
    let cluster = RedisCluster::start().map_err(|e| e.to_string())?;
    let postgres = Postgres::start().map_err(|e| e.to_string())?;
    let dir = tempfile::Builder::new().prefix("larder-stores-").tempdir().map_err(|e| e.to_string())?;
    let urls = [
        "memory://?capacity=1G".to_owned(),
        format!("memcached://{}", memcached.address()),
        redis.url(),
        cluster.url(),
        postgres.url(),
        format!("sqlite://{}", dir.path().join("cache.db").display()),
        format!("file://{}?capacity=2G", dir.path().join("files").display()),
    ];
    for url in &urls {
        println!("{url}");
    }
    // Waits for the caller to close our standard input (or to end), then stops every server by dropping it.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    Ok(())
}
