-- RPermitExpirableSemaphore acquired permits (docs/synchronizers.md).
-- KEYS[1] = <name>, KEYS[2] = {<name>}:timeout, KEYS[3] = redisson_sc:{<name>}.
-- ARGV[1] = now, ARGV[2] = publish. Reclaims every expired id, then
-- returns how many ids the ZSET holds.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1])
local reclaimed = nil
if #expired > 0 then
  for i = 1, #expired, 1000 do
    redis.call('zrem', KEYS[2], unpack(expired, i, math.min(i + 999, #expired)))
  end
  reclaimed = redis.call('incrby', KEYS[1], #expired)
  if tonumber(reclaimed) > 0 then
    for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[3], reclaimed) end
  end
end
return redis.call('zcount', KEYS[2], 0, '+inf')
