-- Acquire or re-enter a Redisson read lock (docs/wire-format.md, "Read/write lock"), with the
-- crate's
-- guard against phantom counts (see rlock_acquire.lua).
-- KEYS[1] = lock hash, KEYS[2] = the caller's marker prefix
-- suffixName(<name>, <field>) .. ':rwlock_timeout', KEYS[3] (only when
-- ARGV[4] > 0) = this attempt's "replaced" marker.
-- ARGV[1] = lease in ms, ARGV[2] = reader field "<clientUUID>:<threadId>",
-- ARGV[3] = the same thread's write field, ARGV[4] = the read holds the caller
-- knows it has (0: none), ARGV[5] = "1" on a resend after a lost reply,
-- ARGV[6] = the "replaced" marker's TTL in ms.
-- Hold n owns the marker KEYS[2]:n (value 1, PX = that hold's lease); the
-- hash's TTL becomes max(its PTTL, lease). The count is set to known + 1, so
-- a resend sets the same count and the same marker again.
-- Returns nil when acquired, -3 when acquired afresh although the caller's
-- known holds were gone, otherwise the hash's PTTL (-1: no TTL).
local known = tonumber(ARGV[4])
if known > 0 and ARGV[5] == '1' and redis.call('del', KEYS[3]) == 1 then
  return -3
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  if known > 0 then
    redis.call('set', KEYS[3], 1, 'px', ARGV[6])
    return -3
  end
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local count = 1
  if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    count = known + 1
  end
  redis.call('hset', KEYS[1], ARGV[2], count)
  redis.call('set', KEYS[2] .. ':' .. count, 1, 'px', ARGV[1])
  local ttl = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(ttl, tonumber(ARGV[1])))
  if count == 1 and known > 0 then
    redis.call('set', KEYS[3], 1, 'px', ARGV[6])
    return -3
  end
  return nil
end
return redis.call('pttl', KEYS[1])
