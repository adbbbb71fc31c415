-- Release one hold of a Redisson FairLock by this crate's own guard: the
-- lock state of docs/wire-format.md, "Fair locks", idempotent without an unlock latch.
-- KEYS[1] = lock hash, KEYS[2] = queue, KEYS[3] = zset, KEYS[4] = base
-- channel redisson_lock__channel:{<name>}.
-- ARGV[1] = unlock message ("0"), ARGV[2] = lease in ms kept on a partial
-- release, ARGV[3] = owner field, ARGV[4] = now (client epoch ms),
-- ARGV[5] = "publish" or "spublish" (both: "publish spublish"), ARGV[6] = the holds the caller keeps
-- after this release (0: free the lock).
-- The count is set, not decremented (see rlock_release.lua), so the same
-- release sent again after a lost reply changes nothing more.
-- Returns 1 when the lock was freed, 0 when holds remain, nil when the caller
-- does not hold it; unlike Redisson's unlock, an absent lock is "not held"
-- (the guard learns that its hold was gone), but the queue head is still
-- told that the lock is free.
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
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local remaining = tonumber(ARGV[6])
if remaining > 0 then
  redis.call('hset', KEYS[1], ARGV[3], remaining)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
  for cmd in string.gmatch(ARGV[5], "%S+") do redis.call(cmd, KEYS[4] .. ':' .. head, ARGV[1]) end
end
return 1
