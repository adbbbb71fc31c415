-- The semaphore floor's acquire: what Redisson's RSemaphore try-acquire
-- (`c7dc9d18`) does (SYNCHRONIZERS §3.1), written for the benchmark, not taken
-- from Redisson: takes ARGV[1] permits from the counter KEYS[1] if at least
-- that many are available (a missing key is 0 permits). No publish.
-- Returns 1 (taken) or 0.
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  return 1
end
return 0
