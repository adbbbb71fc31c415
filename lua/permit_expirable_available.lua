-- RPermitExpirableSemaphore available permits (docs/synchronizers.md).
-- KEYS[1] = <name>, KEYS[2] = {<name>}:timeout, KEYS[3] = redisson_sc:{<name>}.
-- ARGV[1] = now, ARGV[2] = publish. Reclaims every expired id (the new
-- total published if > 0) and returns the available permits (0: no key).
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
if reclaimed ~= nil then
  return reclaimed
end
local value = redis.call('get', KEYS[1])
if value == false then
  return 0
end
return tonumber(value)
