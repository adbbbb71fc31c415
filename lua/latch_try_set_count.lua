-- Set a Redisson RCountDownLatch's count if it has none (docs/synchronizers.md,
-- Redisson's try-set-count script). No validation, as Redisson's: a count of
-- 0 creates a key that blocks the next set until it is deleted.
-- KEYS[1] = the latch (a string holding the count)
-- KEYS[2] = redisson_countdownlatch__channel__{<name>}
-- ARGV[1] = "1" (NEW_COUNT_MESSAGE)
-- ARGV[2] = the count, decimal
-- ARGV[3] = publish | spublish | "publish spublish"
-- Returns 1 when it set the count (and published "1"), 0 when a key exists.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    for cmd in string.gmatch(ARGV[3], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
    return 1
end
return 0
