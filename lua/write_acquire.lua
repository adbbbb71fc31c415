-- Acquire or re-enter a Redisson write lock (docs/wire-format.md, "Read/write lock"), with the
-- crate's guard against phantom counts (see rlock_acquire.lua).
-- KEYS[1] = lock hash; KEYS[2] (only when ARGV[3] > 0) = this attempt's
-- marker.
-- ARGV[1] = lease in ms, ARGV[2] = write field "<clientUUID>:<threadId>:write",
-- ARGV[3] = the write holds the caller knows it has (0: none),
-- ARGV[4] = "1" on a resend after a lost reply, ARGV[5] = the marker's TTL.
-- A reentry ADDS the lease to the remaining PTTL, as Redisson does. The
-- marker records what a first attempt with known > 0 did ("replaced" or
-- "reentered"), so its resend neither counts twice nor adds the lease twice.
-- Returns nil when acquired, -3 when acquired afresh although the caller's
-- known holds were gone, otherwise the hash's PTTL (-1: no TTL).
local known = tonumber(ARGV[3])
if known > 0 and ARGV[4] == '1' then
  local seen = redis.call('get', KEYS[2])
  if seen then
    redis.call('del', KEYS[2])
    if seen == 'replaced' then
      return -3
    end
    return nil
  end
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if known > 0 then
    redis.call('set', KEYS[2], 'replaced', 'px', ARGV[5])
    return -3
  end
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hset', KEYS[1], ARGV[2], known + 1)
  if known > 0 then
    local ttl = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], ttl + tonumber(ARGV[1]))
    redis.call('set', KEYS[2], 'reentered', 'px', ARGV[5])
  else
    -- A count the caller does not know of (a lost reply's): no reentry.
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return nil
end
return redis.call('pttl', KEYS[1])
