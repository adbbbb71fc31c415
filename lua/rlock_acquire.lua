-- Acquire or re-enter a Redisson RLock (docs/wire-format.md, "Acquire").
-- KEYS[1] = lock hash; KEYS[2] (only when ARGV[3] > 0) = this attempt's
-- "replaced" marker, in the lock's slot.
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<clientUUID>:<threadId>",
-- ARGV[3] = how many holds the caller knows it has on this lock (0: none),
-- ARGV[4] = "1" when this is the same attempt sent again after its reply was
-- lost, ARGV[5] = the marker's TTL in ms.
-- The caller's own count is the truth about its own field: a reentry sets the
-- field to known + 1 (Redisson's HINCRBY when both agree), so a count left by
-- an acquire whose reply was lost, or an acquire sent twice, is not counted
-- as a reentry nobody will release.
-- Returns nil when acquired (reentry resets the TTL to the lease); -3 when
-- acquired although the caller's known holds were gone (the lock had been
-- lost and is now taken afresh); otherwise the holder's remaining time to
-- live in ms (-1: the key has no TTL).
-- A -3 leaves the marker behind, so that the attempt sent again after a lost
-- reply answers -3 too instead of counting the fresh hold as a reentry.
local known = tonumber(ARGV[3])
if known > 0 and ARGV[4] == '1' and redis.call('del', KEYS[2]) == 1 then
  return -3
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if known > 0 then
    redis.call('set', KEYS[2], 1, 'px', ARGV[5])
    return -3
  end
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hset', KEYS[1], ARGV[2], known + 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
