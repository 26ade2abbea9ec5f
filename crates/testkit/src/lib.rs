//! Real servers for tests, never mocks: each launcher starts a Debian-packaged server on a free loopback port, in a
//! temporary directory, waits until it answers, and stops it when dropped. A missing server binary is an error that
//! says how to install it (`make services`), so a test that needs memcached fails rather than silently skipping.

pub mod behaviour;
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
