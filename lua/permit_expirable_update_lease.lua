-- RPermitExpirableSemaphore update of a permit's lease (docs/synchronizers.md).
-- KEYS[1] = <name>, KEYS[2] = {<name>}:timeout, KEYS[3] = redisson_sc:{<name>}.
-- ARGV[1] = id (raw bytes), ARGV[2] = new expiry (or the sentinel),
-- ARGV[3] = now, ARGV[4] = publish, ARGV[5] = the id as 32-char hex text
-- (how Redisson up to 3.16.8 stores it; either member is found, and keeps
-- its form). Reclaims every expired id first (an expired permit is not
-- revived); 1 if the id got its new expiry, else 0.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3])
local reclaimed = nil
if #expired > 0 then
  for i = 1, #expired, 1000 do
    redis.call('zrem', KEYS[2], unpack(expired, i, math.min(i + 999, #expired)))
  end
  reclaimed = redis.call('incrby', KEYS[1], #expired)
  if tonumber(reclaimed) > 0 then
    for cmd in string.gmatch(ARGV[4], "%S+") do redis.call(cmd, KEYS[3], reclaimed) end
  end
end
local member = ARGV[1]
if redis.call('zscore', KEYS[2], member) == false and ARGV[5] ~= nil then
  member = ARGV[5]
end
if redis.call('zscore', KEYS[2], member) ~= false then
  redis.call('zadd', KEYS[2], ARGV[2], member)
  return 1
end
return 0
