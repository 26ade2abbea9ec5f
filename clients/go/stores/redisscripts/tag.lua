-- tag (spec/STORES.md §5): adds the stored key ARGV[1] to the tag's set KEYS[1] and keeps the set as long as its
-- longest-lived member: ARGV[2] = the member's expiry in ms since the epoch ('0' = never, which makes the set
-- persistent). A new set takes its first member's expiry. Returns 1.
redis.call('SADD', KEYS[1], ARGV[1])
local at = tonumber(ARGV[2])
if at == 0 then redis.call('PERSIST', KEYS[1]) return 1 end
local current = redis.call('PEXPIRETIME', KEYS[1])
if current == -1 and redis.call('SCARD', KEYS[1]) > 1 then return 1 end
if current == -1 or current < at then redis.call('PEXPIREAT', KEYS[1], at) end
return 1
