-- Release one hold of a Redisson FairLock with an unlock latch: Redisson's
-- unlock (docs/wire-format.md, "Fair locks"), used for unlocks with a caller's request id.
-- KEYS[1] = lock hash, KEYS[2] = queue, KEYS[3] = zset, KEYS[4] = base
-- channel redisson_lock__channel:{<name>}, KEYS[5] = unlock latch.
-- ARGV[1] = unlock message ("0"), ARGV[2] = lease in ms kept on a partial
-- release, ARGV[3] = owner field, ARGV[4] = now (client epoch ms),
-- ARGV[5] = "publish" or "spublish" (both: "publish spublish"), ARGV[6] = latch TTL in ms.
-- The message goes to the queue head's own channel <base>:<head field>.
-- Returns 1 when the lock was freed (also when there was no lock at all, as
-- in Redisson), 0 when holds remain, nil when the caller does not hold it.
local replay = redis.call('get', KEYS[5])
if replay then
  return tonumber(replay)
end
local now = tonumber(ARGV[4])
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then
    for cmd in string.gmatch(ARGV[5], "%S+") do redis.call(cmd, KEYS[4] .. ':' .. head, ARGV[1]) end
  end
  redis.call('set', KEYS[5], 1, 'px', ARGV[6])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[6])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
  for cmd in string.gmatch(ARGV[5], "%S+") do redis.call(cmd, KEYS[4] .. ':' .. head, ARGV[1]) end
end
return 1
