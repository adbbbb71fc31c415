-- The fair lock's floor acquire (PROTOCOL §3.1), written for the benchmark,
-- not taken from Redisson.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadline zset
-- ARGV[1] = lease ms, ARGV[2] = owner field, ARGV[3] = wait ms, ARGV[4] = now (epoch ms)
-- Returns nil when acquired or re-entered, else the wait in ms.
local lock, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local lease, owner = ARGV[1], ARGV[2]
local wait, now = tonumber(ARGV[3]), tonumber(ARGV[4])
-- Drop queued owners whose deadline has passed.
while true do
  local first = redis.call('lindex', queue, 0)
  if not first then break end
  local score = redis.call('zscore', deadlines, first)
  if not score or tonumber(score) > now then break end
  redis.call('lpop', queue)
  redis.call('zrem', deadlines, first)
end
if redis.call('exists', lock) == 0 then
  local first = redis.call('lindex', queue, 0)
  if not first or first == owner then
    redis.call('lpop', queue)
    redis.call('zrem', deadlines, owner)
    for _, waiter in ipairs(redis.call('zrange', deadlines, 0, -1)) do
      redis.call('zincrby', deadlines, -wait, waiter)
    end
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
  end
end
if redis.call('hexists', lock, owner) == 1 then
  redis.call('hincrby', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  return nil
end
if redis.call('zscore', deadlines, owner) then
  local left = redis.call('pttl', lock)
  if left < 0 then left = 0 end
  return left
end
local base = redis.call('pttl', lock)
local last = redis.call('lindex', queue, -1)
if last and last ~= owner then
  local score = redis.call('zscore', deadlines, last)
  if score then base = tonumber(score) - now end
end
if redis.call('zadd', deadlines, base + wait + now, owner) == 1 then
  redis.call('rpush', queue, owner)
end
return base
