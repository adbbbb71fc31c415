-- Acquire or re-enter a Redisson RLock (PROTOCOL §2.1).
-- KEYS[1] = lock hash
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<clientUUID>:<threadId>"
-- Returns nil when acquired (reentry resets the TTL to the lease), otherwise
-- the holder's remaining time to live in ms (-1: the key has no TTL).
if redis.call('exists', KEYS[1]) == 0
    or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
