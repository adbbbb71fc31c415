-- The read lock's floor acquire (PROTOCOL §4.1), written for the benchmark,
-- not taken from Redisson.
-- KEYS[1] = lock hash, KEYS[2] = the caller's marker prefix
-- ("{<name>}:<owner>:rwlock_timeout")
-- ARGV[1] = lease ms, ARGV[2] = owner field, ARGV[3] = the owner's write field
-- Returns nil when acquired, else the hash's remaining time to live in ms.
local lock, markers = KEYS[1], KEYS[2]
local lease, owner, writer = ARGV[1], ARGV[2], ARGV[3]
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call('hset', lock, 'mode', 'read')
  redis.call('hset', lock, owner, 1)
  redis.call('set', markers .. ':1', 1, 'px', lease)
  redis.call('pexpire', lock, lease)
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', lock, writer) == 1) then
  local n = redis.call('hincrby', lock, owner, 1)
  redis.call('set', markers .. ':' .. n, 1, 'px', lease)
  local left = redis.call('pttl', lock)
  redis.call('pexpire', lock, math.max(left, tonumber(lease)))
  return nil
end
return redis.call('pttl', lock)
