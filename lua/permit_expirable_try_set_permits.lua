-- RPermitExpirableSemaphore (and RSemaphore) try-set-permits
-- (docs/synchronizers.md, §4.2). KEYS[1] = <name>, KEYS[2] = redisson_sc:{<name>}.
-- ARGV[1] = n, ARGV[2] = publish. Only when <name> does not exist: set it
-- to n, publish n, return 1; otherwise 0. The timeout ZSET is ignored.
if redis.call('get', KEYS[1]) == false then
  redis.call('set', KEYS[1], ARGV[1])
  for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
  return 1
end
return 0
