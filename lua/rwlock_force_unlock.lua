-- Delete a Redisson read/write lock whoever holds it, if it is in the given
-- mode (docs/wire-format.md, "Read/write lock").
-- KEYS[1] = lock hash, KEYS[2] = channel redisson_rwlock:{<name>}
-- ARGV[1] = message ("0" for the read side, "1" for the write side),
-- ARGV[2] = "publish" or "spublish" (both: "publish spublish"), ARGV[3] = the mode: "read" or "write".
-- Returns 1 when a lock was deleted (and waiters were told), 0 otherwise.
if redis.call('hget', KEYS[1], 'mode') == ARGV[3] then
  redis.call('del', KEYS[1])
  for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
  return 1
end
return 0
