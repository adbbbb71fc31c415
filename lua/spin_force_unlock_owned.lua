-- Delete a Redisson spin lock only while the given owner field holds it
-- (this crate's own guard; a spin lock publishes nothing, docs/wire-format.md, "Spin lock").
-- KEYS[1] = lock hash; ARGV[1] = the owner field <client id>:<thread>.
-- Returns 1 when the lock was deleted, 0 when it changed nothing (free, held
-- by someone else, or a read/write lock's hash).
if redis.call('hexists', KEYS[1], ARGV[1]) == 0
    or redis.call('hexists', KEYS[1], 'mode') == 1 then
  return 0
end
redis.call('del', KEYS[1])
return 1
