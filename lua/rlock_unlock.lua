-- Release one hold of a Redisson RLock, idempotently (docs/wire-format.md, "Release (a guard's
-- unlock)", "The unlock latch"):
-- Redisson's unlock, used for unlocks with a caller's request id.
-- KEYS[1] = lock hash, KEYS[2] = unlock channel, KEYS[3] = unlock latch
-- ARGV[1] = unlock message ("0"), ARGV[2] = lease in ms kept on a partial release,
-- ARGV[3] = owner field, ARGV[4] = "publish" or "spublish" (both: "publish spublish"), ARGV[5] = latch TTL in ms.
-- Returns 1 when the lock was freed, 0 when holds remain, nil when not held.
-- A replay with the same latch returns the first outcome without touching the lock.
local replay = redis.call('get', KEYS[3])
if replay then
  return tonumber(replay)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
for cmd in string.gmatch(ARGV[4], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
