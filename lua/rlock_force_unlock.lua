-- Delete a Redisson RLock whoever holds it (docs/wire-format.md, "Force unlock").
-- KEYS[1] = lock hash, KEYS[2] = unlock channel
-- ARGV[1] = unlock message ("0"), ARGV[2] = "publish" or "spublish" (both: "publish spublish")
-- Returns 1 when a lock was deleted (and waiters were told), 0 otherwise.
if redis.call('del', KEYS[1]) == 1 then
  for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
  return 1
end
return 0
