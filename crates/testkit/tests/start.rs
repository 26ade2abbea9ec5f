//! Every launcher brings up a server that answers, and restarts it on the same port.

use std::io::{Read, Write};
use std::net::TcpStream;

use larder_testkit::{Memcached, Postgres, Redis, RedisCluster};

fn ask(port: u16, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    stream.write_all(request).expect("writes");
    let mut reply = [0u8; 256];
    let n = stream.read(&mut reply).expect("reads");
    String::from_utf8_lossy(&reply[..n]).into_owned()
}

#[test]
fn memcached_answers_and_restarts_on_its_port() {
    let mut memcached = Memcached::start().expect("memcached starts");
    assert_eq!(ask(memcached.port(), b"mn\r\n"), "MN\r\n");
    memcached.stop();
    assert!(TcpStream::connect(("127.0.0.1", memcached.port())).is_err(), "stopped means refusing connections");
    memcached.restart().expect("restarts");
    assert_eq!(ask(memcached.port(), b"mn\r\n"), "MN\r\n");
}

#[test]
fn redis_and_a_cluster_answer() {
    let redis = Redis::start().expect("redis starts");
    assert_eq!(ask(redis.port(), b"PING\r\n"), "+PONG\r\n");
    let cluster = RedisCluster::start().expect("cluster forms");
    assert!(cluster.nodes()[1].cli(&["cluster", "info"]).expect("info").contains("cluster_size:3"));
}

#[test]
fn postgres_runs_in_a_temporary_directory() {
    let mut postgres = Postgres::start().expect("postgres starts");
    let port = postgres.port();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    postgres.restart().expect("restarts with its data");
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
}
