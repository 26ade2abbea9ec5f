-- incr (spec/STORES.md §3): ARGV[1] = delta, ARGV[2] = create ('1' or '0'), ARGV[3] = the TTL in ms of a counter
-- it creates ('0' = none). A missing key without create answers nil and writes nothing; a new counter holds delta.
-- A value that is not an integer is Redis's own error ("not an integer"), which clients read as not_a_counter.
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[2] == '0' then return false end
  redis.call('SET', KEYS[1], ARGV[1])
  if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
  return tonumber(ARGV[1])
end
return redis.call('INCRBY', KEYS[1], ARGV[1])
