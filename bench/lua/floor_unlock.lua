-- The true floor's unlock: the least an RLock unlock does on the wire
-- (PROTOCOL §2.2 without the unlock latch of §1.7), written for the
-- benchmark, not taken from Redisson.
-- KEYS[1] = lock hash, KEYS[2] = unlock channel
-- ARGV[1] = unlock message ("0"), ARGV[2] = lease in ms kept on a partial
-- release, ARGV[3] = owner field, ARGV[4] = "publish" or "spublish"
-- Returns nil when the owner does not hold the lock, 0 when holds remain
-- (the TTL is reset to the lease), 1 when the lock was freed and announced.
local lock, channel = KEYS[1], KEYS[2]
local message, lease, owner, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('hexists', lock, owner) == 0 then
  return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
  redis.call('pexpire', lock, lease)
  return 0
end
redis.call('del', lock)
redis.call(publish, channel, message)
return 1
