-- The write lock's floor unlock (PROTOCOL §4.4 without the unlock latch),
-- written for the benchmark, not taken from Redisson.
-- KEYS[1] = lock hash, KEYS[2] = channel
-- ARGV[1] = message ("1"), ARGV[2] = lease ms kept on a partial release,
-- ARGV[3] = the owner's write field, ARGV[4] = "publish" or "spublish"
-- Returns nil when not held, 0 when holds remain, 1 when the write hold went.
local lock, channel = KEYS[1], KEYS[2]
local message, lease, writer, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call(publish, channel, message)
  return nil
end
if mode ~= 'write' or redis.call('hexists', lock, writer) == 0 then
  return nil
end
if redis.call('hincrby', lock, writer, -1) > 0 then
  redis.call('pexpire', lock, lease)
  return 0
end
redis.call('hdel', lock, writer)
if redis.call('hlen', lock) == 1 then
  redis.call('del', lock)
  redis.call(publish, channel, message)
else
  -- The writer still has read holds: a downgrade, announced to nobody.
  redis.call('hset', lock, 'mode', 'read')
end
return 1
