-- Delete a lock of RLock's layout (reentrant, fenced, non-reentrant) only
-- while the given owner field holds it, then wake its waiters as the kind's
-- own force unlock does (this crate's own; Redisson has no guarded force
-- unlock; the spin lock has its own script, without a message).
-- KEYS[1] = lock hash, KEYS[2] = unlock channel
-- ARGV[1] = message ("0"), ARGV[2] = "publish" or "spublish" (both: "publish spublish"),
-- ARGV[3] = the owner field <client id>:<thread>
-- Returns 1 when the lock was deleted, 0 when it changed nothing (free, held
-- by someone else, or a read/write lock's hash).
if redis.call('hexists', KEYS[1], ARGV[3]) == 0
    or redis.call('hexists', KEYS[1], 'mode') == 1 then
  return 0
end
redis.call('del', KEYS[1])
for cmd in string.gmatch(ARGV[2], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
return 1
