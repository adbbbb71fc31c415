-- Acquire or re-enter a Redisson RLock (PROTOCOL §2.1).
-- KEYS[1] = lock hash
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<clientUUID>:<threadId>",
-- ARGV[3] = "1" when the caller holds no live hold on this lock, so that any
-- count already under its field is stale (an earlier acquire whose reply was
-- lost): the count restarts at 1 instead of counting a reentry nobody will
-- release. Without ARGV[3] this is Redisson's script exactly.
-- Returns nil when acquired (reentry resets the TTL to the lease), otherwise
-- the holder's remaining time to live in ms (-1: the key has no TTL).
if redis.call('exists', KEYS[1]) == 0
    or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if ARGV[3] == '1' then
    redis.call('hset', KEYS[1], ARGV[2], 1)
  else
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
  end
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
