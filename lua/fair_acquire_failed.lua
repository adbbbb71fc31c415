-- A waiter of a Redisson FairLock gives up (docs/wire-format.md, "Fair locks").
-- KEYS[1] = queue, KEYS[2] = zset. ARGV[1] = owner field, ARGV[2] = the
-- waitMs it queued with.
-- Everyone queued behind the caller is one wait closer to the head; then the
-- caller leaves the zset and the queue. A second run finds the caller gone
-- and changes nothing. An entry without a score keeps none (ZINCRBY would
-- create one).
local queue = redis.call('lrange', KEYS[1], 0, -1)
local behind = false
for _, member in ipairs(queue) do
  if behind then
    if redis.call('zscore', KEYS[2], member) ~= false then
      redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), member)
    end
  elseif member == ARGV[1] then
    behind = true
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
return nil
