-- Try once to acquire a Redisson FairLock, never queueing (docs/wire-format.md, "Fair locks");
-- also the non-reentrant fair lock's (§7).
-- KEYS as fair_acquire.lua. ARGV[1] = lease in ms, ARGV[2] = owner field,
-- ARGV[3] = now (the client's epoch ms), ARGV[4] = waitMs (note: ARGV[3] and
-- ARGV[4] are swapped against fair_acquire.lua, as in Redisson), ARGV[5..8]
-- as in fair_acquire.lua (known, reentry error text, resend, marker TTL).
-- Returns nil when acquired, -3 when acquired although the caller's known
-- holds were gone, 1 when not acquired.
local known = tonumber(ARGV[5])
if known > 0 and ARGV[7] == '1' and redis.call('del', KEYS[4]) == 1 then
  return -3
end
local field, now, wait = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
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
return 1
