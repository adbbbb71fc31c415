-- RSemaphore addPermits: adds ARGV[1] (may be negative) to KEYS[1] (missing:
-- 0), written with a plain SET (any TTL is dropped), and publishes the new
-- value on KEYS[2] with ARGV[2], even when it is 0 or negative. Refuses a
-- value outside Java's int. Returns nil.
local value = redis.call('get', KEYS[1])
if value == false then
    value = 0
end
value = tonumber(value)
if value == nil then
    return redis.error_reply('ERR semaphore counter is not an integer')
end
value = value + tonumber(ARGV[1])
if value > 2147483647 or value < -2147483648 then
    return redis.error_reply('ERR semaphore permits would leave the range of a Java int')
end
redis.call('set', KEYS[1], string.format('%d', value))
for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], string.format('%d', value)) end
return nil
