-- RPermitExpirableSemaphore add-permits (docs/synchronizers.md).
-- KEYS[1] = <name>, KEYS[2] = redisson_sc:{<name>}.
-- ARGV[1] = delta (may be negative), ARGV[2] = publish. SET (which drops a
-- TTL, as Redisson's does) the value plus delta; publish the delta if > 0.
local value = redis.call('get', KEYS[1])
if value == false then
  value = 0
end
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then
  for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
end
return nil
