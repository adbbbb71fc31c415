-- RPermitExpirableSemaphore try-acquire (docs/synchronizers.md; Redisson's
-- semantics, this crate's text). KEYS[1] = <name> (available permits),
-- KEYS[2] = {<name>}:timeout (ZSET: raw 16-byte id -> expiry, client
-- epoch ms), KEYS[3] = redisson_sc:{<name>}.
-- ARGV[1] = n, ARGV[2] = expiry (now + lease, or the permanent sentinel),
-- ARGV[3] = now (the caller's clock), ARGV[4] = the sentinel,
-- ARGV[5] = publish | spublish | "publish spublish", ARGV[6..] = the n ids
-- (raw bytes, or 32-char hex text for Redisson up to 3.16.8).
-- Returns 'OK' (acquired), ':<ms>' (the nearest finite expiry) or nil.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1])
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local value = redis.call('incrby', KEYS[1], #expired)
  if tonumber(value) > 0 then
    for cmd in string.gmatch(ARGV[5], "%S+") do redis.call(cmd, KEYS[3], value) end
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
