-- The fenced lock's floor acquire (PROTOCOL §5, the token-returning form
-- that lockAndGetToken uses), written for the benchmark, not taken from
-- Redisson.
-- KEYS[1] = lock hash, KEYS[2] = token counter
-- ARGV[1] = lease ms, ARGV[2] = owner field
-- Returns {-1, token} when acquired or re-entered (each takes a new token),
-- else {remaining time to live in ms, -1}.
local lock, token = KEYS[1], KEYS[2]
local lease, owner = ARGV[1], ARGV[2]
if redis.call('exists', lock) == 1 and redis.call('hexists', lock, owner) == 0 then
  return {redis.call('pttl', lock), -1}
end
local t = redis.call('incr', token)
redis.call('hincrby', lock, owner, 1)
redis.call('pexpire', lock, lease)
return {-1, t}
