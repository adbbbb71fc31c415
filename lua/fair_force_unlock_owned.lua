-- Delete a Redisson FairLock only while the given owner field holds it, then
-- wake the queue head on its own channel, as the fair force unlock does
-- (docs/wire-format.md, "Fair locks"; the owner guard is this crate's own).
-- KEYS[1] = lock hash, KEYS[2] = queue, KEYS[3] = zset, KEYS[4] = base
-- channel redisson_lock__channel:{<name>}.
-- ARGV[1] = unlock message ("0"), ARGV[2] = now (client epoch ms),
-- ARGV[3] = "publish" or "spublish" (both: "publish spublish"), ARGV[4] = the owner field.
-- Returns 1 when the lock was deleted (and the head told), 0 when it changed
-- nothing (free, or held by someone else).
if redis.call('hexists', KEYS[1], ARGV[4]) == 0
    or redis.call('hexists', KEYS[1], 'mode') == 1 then
  return 0
end
local now = tonumber(ARGV[2])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
  for cmd in string.gmatch(ARGV[3], "%S+") do redis.call(cmd, KEYS[4] .. ':' .. head, ARGV[1]) end
end
return 1
