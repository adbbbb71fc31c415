-- Release one hold of a Redisson SpinLock by this crate's own guard
-- (docs/wire-format.md, "Spin lock"): rlock_release.lua without the unlock message, since a spin
-- lock's waiters poll and nobody listens.
-- KEYS[1] = lock hash
-- ARGV[1] = lease in ms kept on a partial release, ARGV[2] = owner field,
-- ARGV[3] = the holds the caller keeps after this release (0: free the lock).
-- The count is set, not decremented (see rlock_release.lua), so the same
-- release sent again after a lost reply is harmless without a latch.
-- Returns 1 when the lock was freed, 0 when holds remain, nil when not held.
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local remaining = tonumber(ARGV[3])
if remaining > 0 then
  redis.call('hset', KEYS[1], ARGV[2], remaining)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
return 1
