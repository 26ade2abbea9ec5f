-- delete_if (spec/STORES.md §3): delete KEYS[1] only while it holds the token ARGV[1], so a lock holder whose lock
-- expired never releases the next holder's. Returns 1 when it deleted, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end
