-- RSemaphore try-acquire (Redisson's tryAcquire): takes ARGV[1] permits from
-- the counter KEYS[1] if at least that many are available. A missing key is 0
-- permits. Publishes nothing. Returns 1 (taken) or 0.
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
local available = tonumber(value)
if available == nil then
    return redis.error_reply('ERR semaphore counter is not an integer')
end
if available >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
