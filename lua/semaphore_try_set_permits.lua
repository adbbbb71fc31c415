-- RSemaphore trySetPermits: only if KEYS[1] does not exist, sets it to
-- ARGV[1] and publishes ARGV[1] on KEYS[2] with ARGV[2]. Returns 1 or 0.
if redis.call('get', KEYS[1]) == false then
    redis.call('set', KEYS[1], ARGV[1])
    for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
    return 1
end
return 0
