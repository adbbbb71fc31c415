-- Acquire a Redisson FairLock, queueing the caller when it must wait
-- (docs/wire-format.md, "Fair locks"); also the non-reentrant fair lock's (§7).
-- KEYS[1] = lock hash, KEYS[2] = queue redisson_lock_queue:{<name>},
-- KEYS[3] = zset redisson_lock_timeout:{<name>}, KEYS[4] (only when
-- ARGV[5] > 0) = this attempt's "replaced" marker, in the lock's slot.
-- ARGV[1] = lease in ms, ARGV[2] = owner field, ARGV[3] = waitMs,
-- ARGV[4] = now (the client's epoch ms), ARGV[5] = holds the caller knows it
-- has (0: none), ARGV[6] = "" for the reentrant lock, else the error text a
-- reentry gets (NON_REENTRANT_REACQUIRE), ARGV[7] = "1" when this is the same
-- attempt sent again after its reply was lost, ARGV[8] = the marker's TTL.
-- The caller's own count is the truth about its field (see rlock_acquire.lua):
-- a reentry sets known + 1, a field found with known = 0 was left by an
-- acquire whose reply was lost and is taken afresh with count 1.
-- Returns nil when acquired; -3 when acquired although the caller's known
-- holds were gone; otherwise a time to wait in ms: max(0, PTTL) when already
-- queued, Redisson's `base` when it joined the queue (-1 when that is
-- negative, so that it never reads as -3).
local known = tonumber(ARGV[5])
if known > 0 and ARGV[7] == '1' and redis.call('del', KEYS[4]) == 1 then
  return -3
end
local field, wait, now = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
-- Step P: drop timed-out waiters from the head of the queue.
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline == false or tonumber(deadline) > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false or head == field then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], field)
    -- Everyone still queued is one wait closer to the head.
    local queued = redis.call('zrange', KEYS[3], 0, -1)
    for _, member in ipairs(queued) do
      redis.call('zincrby', KEYS[3], -wait, member)
    end
    redis.call('hset', KEYS[1], field, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if known > 0 then
      redis.call('set', KEYS[4], 1, 'px', ARGV[8])
      return -3
    end
    return nil
  end
end
if redis.call('hexists', KEYS[1], field) == 1 then
  if known > 0 and ARGV[6] ~= '' then
    return redis.error_reply(ARGV[6])
  end
  redis.call('hset', KEYS[1], field, known + 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], field) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local base
local tail = redis.call('lindex', KEYS[2], -1)
local tail_deadline = false
if tail ~= false and tail ~= field then
  tail_deadline = redis.call('zscore', KEYS[3], tail)
end
if tail_deadline ~= false then
  base = tonumber(tail_deadline) - now
else
  base = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], base + wait + now, field) == 1 then
  redis.call('rpush', KEYS[2], field)
end
if base < 0 then
  return -1
end
return base
