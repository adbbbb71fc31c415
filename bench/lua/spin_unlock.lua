-- The spin lock's floor unlock (PROTOCOL §6 without the unlock latch): the
-- RLock unlock with no publish, written for the benchmark, not taken from
-- Redisson. (Its acquire is the RLock floor's, floor_acquire.lua.)
-- KEYS[1] = lock hash
-- ARGV[1] = lease ms kept on a partial release, ARGV[2] = owner field
-- Returns nil when not held, 0 when holds remain, 1 when freed.
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
if redis.call('hexists', lock, owner) == 0 then
  return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
  redis.call('pexpire', lock, lease)
  return 0
end
redis.call('del', lock)
return 1
