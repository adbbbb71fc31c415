-- Count down a Redisson RCountDownLatch (docs/synchronizers.md, Redisson's
-- count-down script): decrement; at 0 or below the key is deleted, and only
-- the decrement that reaches exactly 0 announces it. A missing key goes to -1
-- and is deleted at once: a no-op without a message.
-- KEYS[1] = the latch (a string holding the count)
-- KEYS[2] = redisson_countdownlatch__channel__{<name>}
-- ARGV[1] = "0" (ZERO_COUNT_MESSAGE)
-- ARGV[2] = publish | spublish | "publish spublish"
-- Returns nil, as Redisson's does.
local count = redis.call('decr', KEYS[1])
if count <= 0 then
    redis.call('del', KEYS[1])
end
if count == 0 then
    for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
end
return nil
