-- Delete a Redisson RCountDownLatch (docs/synchronizers.md, Redisson's delete
-- script): announces "1" (NEW_COUNT_MESSAGE), which closes Java's latch and
-- so does not release Java waiters (§5.2); Rust waiters re-check the count.
-- KEYS[1] = the latch
-- KEYS[2] = redisson_countdownlatch__channel__{<name>}
-- ARGV[1] = "1" (NEW_COUNT_MESSAGE)
-- ARGV[2] = publish | spublish | "publish spublish"
-- Returns 1 when a key was deleted (and "1" published), 0 otherwise.
if redis.call('del', KEYS[1]) == 1 then
    for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
    return 1
end
return 0
