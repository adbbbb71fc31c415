-- RSemaphore drainPermits: sets KEYS[1] to 0 (a plain SET: any TTL is
-- dropped) and returns the old value, which may be negative; a missing key
-- stays missing and gives 0. Publishes nothing.
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(value)
