-- The permit-expirable semaphore floor's release: what Redisson's
-- try-release of one id (`4ce07945`, sent by `release(id)`) does
-- (SYNCHRONIZERS §4.2), written for the benchmark. KEYS[1] = <name>, KEYS[2] = redisson_sc:{<name>}, KEYS[3] =
-- {<name>}:timeout. ARGV[1] = the id (raw bytes), ARGV[2] = 1, ARGV[3] = now,
-- ARGV[4] = publish | spublish.
-- Returns 1 (released), or 0 (unknown, or already expired: then returned to
-- the pool all the same).
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if tonumber(removed) ~= 1 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(expiry) <= tonumber(ARGV[3]) then
  return 0
end
return 1
