-- The fair lock's floor unlock (PROTOCOL §3.4 without the unlock latch),
-- written for the benchmark, not taken from Redisson.
-- KEYS[1] = lock hash, KEYS[2] = queue list, KEYS[3] = deadline zset,
-- KEYS[4] = base channel (the queue head's channel is "<base>:<head>")
-- ARGV[1] = message ("0"), ARGV[2] = lease ms kept on a partial release,
-- ARGV[3] = owner field, ARGV[4] = now (epoch ms), ARGV[5] = "publish" or "spublish"
-- Returns nil when not held, 0 when holds remain, 1 when freed (or already gone).
local lock, queue, deadlines, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, lease, owner = ARGV[1], ARGV[2], ARGV[3]
local now, publish = tonumber(ARGV[4]), ARGV[5]
while true do
  local first = redis.call('lindex', queue, 0)
  if not first then break end
  local score = redis.call('zscore', deadlines, first)
  if not score or tonumber(score) > now then break end
  redis.call('lpop', queue)
  redis.call('zrem', deadlines, first)
end
local function wake_head()
  local first = redis.call('lindex', queue, 0)
  if first then redis.call(publish, channel .. ':' .. first, message) end
end
if redis.call('exists', lock) == 0 then
  wake_head()
  return 1
end
if redis.call('hexists', lock, owner) == 0 then
  return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
  redis.call('pexpire', lock, lease)
  return 0
end
redis.call('del', lock)
wake_head()
return 1
