-- Release one hold of a Redisson SpinLock, idempotently (docs/wire-format.md, "Spin lock",
-- "The unlock latch"):
-- Redisson's spin unlock with an unlock latch, publishing nothing.
-- KEYS[1] = lock hash, KEYS[2] = unlock latch
-- ARGV[1] = lease in ms kept on a partial release, ARGV[2] = owner field,
-- ARGV[3] = latch TTL in ms.
-- Returns 1 when the lock was freed, 0 when holds remain, nil when not held.
-- A replay with the same latch returns the first outcome without touching the lock.
local replay = redis.call('get', KEYS[2])
if replay then
  return tonumber(replay)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], 0, 'px', ARGV[3])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[2], 1, 'px', ARGV[3])
return 1
