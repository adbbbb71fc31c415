-- The permit-expirable semaphore floor's acquire: what Redisson's try-acquire
-- (`992c96b0`) does (SYNCHRONIZERS §4.2), written for the benchmark.
-- KEYS[1] = <name> (available permits), KEYS[2] = {<name>}:timeout (ZSET:
-- raw 16-byte id -> expiry in the caller's epoch ms), KEYS[3] =
-- redisson_sc:{<name>}.
-- ARGV[1] = n, ARGV[2] = expiry (now + lease, or the permanent sentinel),
-- ARGV[3] = now, ARGV[4] = the sentinel, ARGV[5] = publish | spublish,
-- ARGV[6..] = the n ids.
-- Reclaims at most n expired ids (publishing the new count if > 0), then
-- takes n permits if available: 'OK'; else ':<nearest finite expiry>' or nil.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local value = redis.call('incrby', KEYS[1], #expired)
  if tonumber(value) > 0 then
    redis.call(ARGV[5], KEYS[3], value)
  end
end
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return 'OK'
end
local nearest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if nearest[1] ~= nil and nearest[2] ~= ARGV[4] then
  return ':' .. nearest[2]
end
return nil
