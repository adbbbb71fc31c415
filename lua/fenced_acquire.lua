-- Acquire or re-enter a Redisson FencedLock (docs/wire-format.md, "Fenced lock"): RLock's acquire
-- (see rlock_acquire.lua, same ARGV) that also INCRs the token counter on
-- every acquisition, reentry included.
-- KEYS[1] = lock hash, KEYS[2] = the token key redisson_lock_token:{<name>}
-- (no TTL), KEYS[3] (only when ARGV[3] > 0) = the "replaced" marker.
-- Returns {1, token} when acquired, {3, token} when acquired although the
-- caller's known holds were gone, {0, pttl} when someone else holds it.
local known = tonumber(ARGV[3])
if known > 0 and ARGV[4] == '1' and redis.call('del', KEYS[3]) == 1 then
  return {3, tonumber(redis.call('get', KEYS[2]) or '0')}
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  local token = redis.call('incr', KEYS[2])
  if known > 0 then
    redis.call('set', KEYS[3], 1, 'px', ARGV[5])
    return {3, token}
  end
  return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hset', KEYS[1], ARGV[2], known + 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
