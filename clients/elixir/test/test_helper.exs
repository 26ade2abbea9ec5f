# Servers shared by the store tests: one memcached and one redis-server on free loopback ports for the whole run
# (tests use distinct keys or prefixes, so they pass in any order), stopped when the run ends.
{mc, mc_port} = Larder.TestServers.memcached()
{redis, redis_port} = Larder.TestServers.redis()
Application.put_env(:larder, :test_memcached, "127.0.0.1:#{mc_port}")
Application.put_env(:larder, :test_redis, "127.0.0.1:#{redis_port}")

ExUnit.after_suite(fn _ ->
  Larder.TestServers.stop(mc)
  Larder.TestServers.stop(redis)
end)

ExUnit.start()
