-- RPermitExpirableSemaphore try-release of one id (docs/synchronizers.md).
-- KEYS[1] = <name>, KEYS[2] = redisson_sc:{<name>}, KEYS[3] = {<name>}:timeout.
-- ARGV[1] = id (raw bytes), ARGV[2] = 1, ARGV[3] = now, ARGV[4] = publish,
-- ARGV[5] = the same id as 32-char hex text (how Redisson up to 3.16.8
-- stores it): the member is whichever of the two the ZSET has.
-- An id found is returned to the pool (the new total is published); the
-- reply is 1, or 0 when it had already expired (or was not there).
local member = ARGV[1]
local expiry = redis.call('zscore', KEYS[3], member)
if expiry == false and ARGV[5] ~= nil then
  member = ARGV[5]
  expiry = redis.call('zscore', KEYS[3], member)
end
local removed = redis.call('zrem', KEYS[3], member)
if tonumber(removed) == 0 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
for cmd in string.gmatch(ARGV[4], "%S+") do redis.call(cmd, KEYS[2], value) end
if tonumber(expiry) <= tonumber(ARGV[3]) then
  return 0
end
return 1
