-- Delete a Redisson FairLock whoever holds it (docs/wire-format.md, "Fair locks").
-- KEYS[1] = lock hash, KEYS[2] = queue, KEYS[3] = zset, KEYS[4] = base
-- channel redisson_lock__channel:{<name>}.
-- ARGV[1] = unlock message ("0"), ARGV[2] = now (client epoch ms),
-- ARGV[3] = "publish" or "spublish" (both: "publish spublish").
-- Returns 1 when a lock was deleted (and the queue head was told), 0 otherwise.
local now = tonumber(ARGV[2])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
if redis.call('del', KEYS[1]) == 1 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then
    for cmd in string.gmatch(ARGV[3], "%S+") do redis.call(cmd, KEYS[4] .. ':' .. head, ARGV[1]) end
  end
  return 1
end
return 0
