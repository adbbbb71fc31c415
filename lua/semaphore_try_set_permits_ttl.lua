-- RSemaphore trySetPermits(permits, ttl) (3.29.0+): as trySetPermits, the
-- counter set with a time to live of ARGV[3] ms. Returns 1 or 0.
if redis.call('get', KEYS[1]) == false then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
    for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
    return 1
end
return 0
