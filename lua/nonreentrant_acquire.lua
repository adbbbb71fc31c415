-- Acquire a Redisson non-reentrant lock (docs/wire-format.md, "Non-reentrant lock"): RLock's
-- layout, but a
-- second acquisition by the holder is refused with an error reply.
-- KEYS[1] = lock hash
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<clientUUID>:<threadId>",
-- ARGV[3] = how many holds the caller counts on this lock (the crate refuses
-- a reentry itself before sending, so this is 0 unless a caller's count and
-- the server disagree), ARGV[4] = the error text NON_REENTRANT_REACQUIRE.
-- The caller's own count is the truth about its own field (as in
-- rlock_acquire.lua): a field the caller counts no hold on was left by an
-- acquire whose reply was lost (or sent twice), so it is taken afresh with a
-- count of 1 instead of being refused as a reentry.
-- Returns nil when acquired, the error reply ARGV[4] when the caller already
-- holds it, otherwise the holder's remaining time to live in ms (-1: no TTL).
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if tonumber(ARGV[3]) > 0 then
    return redis.error_reply(ARGV[4])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
