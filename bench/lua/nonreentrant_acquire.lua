-- The non-reentrant lock's floor acquire (PROTOCOL §7), written for the
-- benchmark, not taken from Redisson. (Its unlock is the RLock floor's.)
-- KEYS[1] = lock hash
-- ARGV[1] = lease ms, ARGV[2] = owner field, ARGV[3] = error text for a re-entry
-- Returns nil when acquired, an error reply when the caller already holds
-- it, else the holder's remaining time to live in ms.
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 then
  redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  return nil
end
if redis.call('hexists', lock, owner) == 1 then
  return redis.error_reply(ARGV[3])
end
return redis.call('pttl', lock)
