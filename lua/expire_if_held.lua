-- Set a held lock's lease (MultiLock/RedLock, docs/wire-format.md, "MultiLock and RedLock":
-- Redisson's
-- multilock-expire, guarded by the owner's field so that a lock taken over by
-- someone else meanwhile keeps its own lease).
-- KEYS[1] = lock hash, ARGV[1] = owner field, ARGV[2] = lease in ms.
-- Returns 1 when set, 0 when the owner no longer holds it.
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
