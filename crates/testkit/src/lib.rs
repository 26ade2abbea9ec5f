//! Real servers for tests, never mocks: each launcher starts a Debian-packaged server on a free loopback port, in a
//! temporary directory, waits until it answers, and stops it when dropped. A missing server binary is an error that
//! says how to install it (`make services`), so a test that needs memcached fails rather than silently skipping.
//!
//! Failures are injected between a client and such a real server, never simulated: [`faults::FaultProxy`] is a TCP
//! proxy on a loopback port that a test switches at any moment (for open and new connections alike) between
//! forwarding, delaying replies, freezing (a SIGSTOPped server), resetting, black-holing, half-closing, trickling
//! replies, cutting them mid-value and refusing connections (a killed server), and counts connections and bytes. The
//! `larder-faults` binary wraps it for the other languages' suites: it prints its address, takes one command per line
//! on standard input (`pass`, `delay MS`, `freeze`, `reset`, `blackhole`, `half-close`, `trickle BYTES MS`,
//! `cut AFTER_BYTES`, `refuse`, `stats`) and exits when that input closes, so every language runs the same fault
//! scenarios (spec/STORES.md §1, "Failure and recovery"). `hostile` is the other half: a fake server that answers
//! with bad replies.

pub mod behaviour;
pub mod faults;
pub mod hostile;
pub mod intercepted;
mod memcached;
mod postgres;
mod process;
mod redis;

pub use memcached::Memcached;
pub use postgres::Postgres;
pub use process::{free_port, TestkitError};
pub use redis::{Redis, RedisCluster};
