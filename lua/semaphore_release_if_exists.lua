-- RSemaphore releaseIfExists (4.0.0+): as the release, but only when KEYS[1]
-- exists; nothing is written or published otherwise. Returns 1 or 0.
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local value = tonumber(redis.call('get', KEYS[1]))
if value ~= nil and value + tonumber(ARGV[1]) > 2147483647 then
    return redis.error_reply('ERR semaphore permits would exceed 2147483647')
end
local total = redis.call('incrby', KEYS[1], ARGV[1])
for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], total) end
return 1
