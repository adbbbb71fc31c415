-- RSemaphore release: adds ARGV[1] permits to KEYS[1] (a missing key is
-- created with that value and no TTL; an existing TTL is kept) and publishes
-- the new total on KEYS[2] with ARGV[2] (`publish` or `spublish`). Refuses a
-- total beyond Java's int. Returns nil.
local value = tonumber(redis.call('get', KEYS[1]) or '0')
if value ~= nil and value + tonumber(ARGV[1]) > 2147483647 then
    return redis.error_reply('ERR semaphore permits would exceed 2147483647')
end
local total = redis.call('incrby', KEYS[1], ARGV[1])
for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], total) end
return nil
