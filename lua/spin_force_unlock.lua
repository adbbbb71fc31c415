-- Delete a Redisson SpinLock whoever holds it (docs/wire-format.md, "Spin lock"): a DEL, and no
-- message, since a spin lock's waiters poll.
-- KEYS[1] = lock hash
-- Returns 1 when a lock was deleted, 0 otherwise.
return redis.call('del', KEYS[1])
