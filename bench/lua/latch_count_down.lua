-- The latch floor's count-down: what Redisson's RCountDownLatch count-down
-- (`38060fab`) does (SYNCHRONIZERS §5.1), written for the benchmark.
-- KEYS[1] = the latch, KEYS[2] = redisson_countdownlatch__channel__{<name>}
-- ARGV[1] = "0" (the zero-count message), ARGV[2] = publish | spublish
-- Decrements; at 0 or below deletes the key; only reaching exactly 0
-- publishes. Returns nil.
local v = redis.call('decr', KEYS[1])
if v <= 0 then
  redis.call('del', KEYS[1])
end
if v == 0 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return nil
