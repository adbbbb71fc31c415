-- RPermitExpirableSemaphore try-release of several ids, all or nothing
-- (Redisson 3.41.0+, docs/synchronizers.md). KEYS[1] = <name>,
-- KEYS[2] = redisson_sc:{<name>}, KEYS[3] = {<name>}:timeout.
-- ARGV[1] = count, ARGV[2] = now, ARGV[3] = publish, ARGV[4..] = the ids
-- in pairs: raw bytes, then the same id as 32-char hex text (how Redisson
-- up to 3.16.8 stores it); each id's member is whichever form the ZSET has.
-- Any id missing or expired: 0, nothing changed. Otherwise every expired id
-- is reclaimed (the new total published if > 0), the ids are returned to
-- the pool, the number returned is published and replied.
local members = {}
for i = 4, #ARGV, 2 do
  local member = ARGV[i]
  local expiry = redis.call('zscore', KEYS[3], member)
  if expiry == false and ARGV[i + 1] ~= nil then
    member = ARGV[i + 1]
    expiry = redis.call('zscore', KEYS[3], member)
  end
  if expiry == false or tonumber(expiry) <= tonumber(ARGV[2]) then
    return 0
  end
  members[#members + 1] = member
end
local expired = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2])
if #expired > 0 then
  for i = 1, #expired, 1000 do
    redis.call('zrem', KEYS[3], unpack(expired, i, math.min(i + 999, #expired)))
  end
  local value = redis.call('incrby', KEYS[1], #expired)
  if tonumber(value) > 0 then
    for cmd in string.gmatch(ARGV[3], "%S+") do redis.call(cmd, KEYS[2], value) end
  end
end
local removed = 0
for _, member in ipairs(members) do
  removed = removed + redis.call('zrem', KEYS[3], member)
end
if removed > 0 then
  redis.call('incrby', KEYS[1], removed)
  for cmd in string.gmatch(ARGV[3], "%S+") do redis.call(cmd, KEYS[2], removed) end
end
return removed
