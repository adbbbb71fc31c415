-- RPermitExpirableSemaphore try-release of one id (SYNCHRONIZERS §4.2).
-- KEYS[1] = <name>, KEYS[2] = redisson_sc:{<name>}, KEYS[3] = {<name>}:timeout.
-- ARGV[1] = id (raw bytes), ARGV[2] = 1, ARGV[3] = now, ARGV[4] = publish.
-- An id found is returned to the pool (the new total is published); the
-- reply is 1, or 0 when it had already expired (or was not there).
local expiry = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if tonumber(removed) == 0 then
  return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[2])
for cmd in string.gmatch(ARGV[4], "%S+") do redis.call(cmd, KEYS[2], value) end
if tonumber(expiry) <= tonumber(ARGV[3]) then
  return 0
end
return 1
