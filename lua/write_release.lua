-- Release write holds of a Redisson write lock by this crate's own guard
-- (the lock state of docs/wire-format.md, "Read/write lock", idempotent without an unlock latch).
-- KEYS[1] = lock hash, KEYS[2] = channel redisson_rwlock:{<name>}
-- ARGV[1] = message ("1": wakes every waiter), ARGV[2] = lease in ms kept on
-- a partial release, ARGV[3] = write field, ARGV[4] = "publish",
-- "spublish" or "publish spublish" (each word publishes), ARGV[5] = the
-- write holds the caller keeps (0: none).
-- The count is set, not decremented (see rlock_release.lua). The last write
-- hold deletes the hash and publishes, unless the same thread still holds
-- read holds: then the mode becomes read and nothing is published (a
-- downgrade).
-- Returns 1 when the write lock was freed, 0 when holds remain, nil when
-- not held.
if redis.call('hget', KEYS[1], 'mode') ~= 'write'
    or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local remaining = tonumber(ARGV[5])
if remaining > 0 then
  redis.call('hset', KEYS[1], ARGV[3], remaining)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  for cmd in string.gmatch(ARGV[4], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1
