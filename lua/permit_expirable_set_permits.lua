-- RPermitExpirableSemaphore set-permits (docs/synchronizers.md).
-- KEYS[1] = <name>, KEYS[2] = redisson_sc:{<name>}, KEYS[3] = {<name>}:timeout.
-- ARGV[1] = the target total, ARGV[2] = publish. Makes available + acquired
-- equal the target (expired but unreclaimed ids count as acquired) and
-- publishes the target when it changed anything.
local available = redis.call('get', KEYS[1])
if available == false then
  redis.call('set', KEYS[1], ARGV[1])
  for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
  return nil
end
local total = redis.call('zcount', KEYS[3], 0, '+inf') + tonumber(available)
if total == tonumber(ARGV[1]) then
  return nil
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
return nil
