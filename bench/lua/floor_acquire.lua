-- The true floor's acquire: the least an RLock acquire does on the wire
-- (PROTOCOL §2.1), written for the benchmark, not taken from Redisson.
-- KEYS[1] = lock hash
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<clientUUID>:<threadId>"
-- Returns nil when acquired or re-entered (the count goes up by one and the
-- TTL is reset to the lease), else the holder's remaining time to live in ms.
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 1 and redis.call('hexists', lock, owner) == 0 then
  return redis.call('pttl', lock)
end
redis.call('hincrby', lock, owner, 1)
redis.call('pexpire', lock, lease)
return nil
