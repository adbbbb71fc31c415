-- The write lock's floor acquire (PROTOCOL §4.3), written for the benchmark,
-- not taken from Redisson.
-- KEYS[1] = lock hash
-- ARGV[1] = lease ms, ARGV[2] = the owner's write field ("<owner>:write")
-- Returns nil when acquired or re-entered (re-entry adds the lease to the
-- TTL), else the hash's remaining time to live in ms.
local lock, lease, writer = KEYS[1], ARGV[1], ARGV[2]
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call('hset', lock, 'mode', 'write')
  redis.call('hset', lock, writer, 1)
  redis.call('pexpire', lock, lease)
  return nil
end
if mode == 'write' and redis.call('hexists', lock, writer) == 1 then
  redis.call('hincrby', lock, writer, 1)
  redis.call('pexpire', lock, redis.call('pttl', lock) + tonumber(lease))
  return nil
end
return redis.call('pttl', lock)
