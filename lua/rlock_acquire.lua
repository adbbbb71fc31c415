-- Acquire or re-enter a Redisson RLock (PROTOCOL §2.1).
-- KEYS[1] = lock hash
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<clientUUID>:<threadId>",
-- ARGV[3] = how many holds the caller knows it has on this lock (0: none).
-- The caller's own count is the truth about its own field: a reentry sets the
-- field to known + 1 (Redisson's HINCRBY when both agree), so a count left by
-- an acquire whose reply was lost, or an acquire sent twice, is not counted
-- as a reentry nobody will release.
-- Returns nil when acquired (reentry resets the TTL to the lease); -3 when
-- acquired although the caller's known holds were gone (the lock had been
-- lost and is now taken afresh); otherwise the holder's remaining time to
-- live in ms (-1: the key has no TTL).
local known = tonumber(ARGV[3])
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if known > 0 then
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
