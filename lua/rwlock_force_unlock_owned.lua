-- Delete a Redisson read/write lock only while it is in the given mode and
-- the given owner field holds it (a reader's <id>:<thread>, or the writer's
-- <id>:<thread>:write), then publish as the side's force unlock does
-- (docs/wire-format.md, "Read/write lock"; the owner guard is this crate's own). Deleting the hash
-- frees every holder, as Redisson's force unlock does.
-- KEYS[1] = lock hash, KEYS[2] = channel redisson_rwlock:{<name>}
-- ARGV[1] = message ("0" read side, "1" write side), ARGV[2] = "publish",
-- "spublish" or "publish spublish" (each word publishes), ARGV[3] = the mode: "read" or "write", ARGV[4] = owner field.
-- Returns 1 when the lock was deleted (and waiters told), 0 when it changed
-- nothing.
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[3]
    or redis.call('hexists', KEYS[1], ARGV[4]) == 0 then
  return 0
end
redis.call('del', KEYS[1])
for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
return 1
