//! The few operations that must read and write atomically, as Lua scripts (each touches one key, so they run on
//! a Cluster too).

use std::sync::LazyLock;

use redis::Script;

/// `delete_if` (spec/STORES.md §3): delete only while the value is the token.
pub static DELETE_IF: LazyLock<Script> = LazyLock::new(|| {
    Script::new("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end")
});

/// `incr`: ARGV = delta, create (1/0), TTL in ms for a new counter (0 = none). Missing without create: nil.
pub static INCR: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[2] == '0' then return false end
  redis.call('SET', KEYS[1], ARGV[1])
  if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
  return tonumber(ARGV[1])
end
return redis.call('INCRBY', KEYS[1], ARGV[1])",
    )
});

/// Adds a key to a tag's set and keeps the set as long as its longest-lived member: ARGV = member, its expiry in
/// ms (0 = never).
pub static TAG: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('SADD', KEYS[1], ARGV[1])
local at = tonumber(ARGV[2])
if at == 0 then redis.call('PERSIST', KEYS[1]) return 1 end
local current = redis.call('PEXPIRETIME', KEYS[1])
if current == -1 and redis.call('SCARD', KEYS[1]) > 1 then return 1 end
if current == -1 or current < at then redis.call('PEXPIREAT', KEYS[1], at) end
return 1",
    )
});
