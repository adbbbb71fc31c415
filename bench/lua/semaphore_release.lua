-- The semaphore floor's release: what Redisson's RSemaphore release
-- (`ae275824`) does (SYNCHRONIZERS §3.1), written for the benchmark: adds ARGV[1] permits to KEYS[1] and publishes the new total on
-- KEYS[2] (`redisson_sc:{<name>}`) with ARGV[2] (`publish` or `spublish`).
-- Returns nil.
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
return nil
