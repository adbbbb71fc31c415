-- Release one hold of a Redisson RLock by this crate's own guard (the same
-- lock state as docs/wire-format.md, "Release (a guard's unlock)", idempotent without an
-- unlock latch).
-- KEYS[1] = lock hash, KEYS[2] = unlock channel
-- ARGV[1] = unlock message ("0"), ARGV[2] = lease in ms kept on a partial release,
-- ARGV[3] = owner field, ARGV[4] = "publish" or "spublish" (both: "publish spublish"),
-- ARGV[5] = the holds the caller keeps after this release (0: free the lock).
-- The caller's own count is the truth about its field (see rlock_acquire.lua),
-- so the count is set, not decremented: the same release sent again after a
-- lost reply sets the same count, or finds the field gone, and never releases
-- a second hold or someone else's lock.
-- Returns 1 when the lock was freed, 0 when holds remain, nil when not held.
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local remaining = tonumber(ARGV[5])
if remaining > 0 then
  redis.call('hset', KEYS[1], ARGV[3], remaining)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
for cmd in string.gmatch(ARGV[4], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
return 1
