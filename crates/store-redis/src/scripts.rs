//! The few operations that must read and write atomically, as Lua scripts (each touches one key, so they run on
//! a Cluster too). The scripts live once, in spec/redis/, for every language; they are compiled in from there.

use std::sync::LazyLock;

use redis::Script;

/// `delete_if` (spec/STORES.md §3): delete only while the value is the token.
pub static DELETE_IF: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../spec/redis/delete_if.lua")));

/// `incr`: ARGV = delta, create (1/0), TTL in ms for a new counter (0 = none). Missing without create: nil.
pub static INCR: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../spec/redis/incr.lua")));

/// Adds a key to a tag's set and keeps the set as long as its longest-lived member: ARGV = member, its expiry in
/// ms (0 = never).
pub static TAG: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../../spec/redis/tag.lua")));
