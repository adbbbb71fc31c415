-- The read lock's floor unlock (PROTOCOL §4.2 without the unlock latch),
-- written for the benchmark, not taken from Redisson.
-- KEYS[1] = lock hash, KEYS[2] = channel, KEYS[3] = the caller's marker
-- prefix, KEYS[4] = key prefix ("{<name>}", or the name when it has a brace)
-- ARGV[1] = message ("0"), ARGV[2] = owner field, ARGV[3] = "publish" or "spublish"
-- Returns nil when not held, 0 when the hash stays, 1 when it was deleted.
local lock, channel, markers, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, owner, publish = ARGV[1], ARGV[2], ARGV[3]
if not redis.call('hget', lock, 'mode') then
  redis.call(publish, channel, message)
  return nil
end
if redis.call('hexists', lock, owner) == 0 then
  return nil
end
local left = redis.call('hincrby', lock, owner, -1)
if left == 0 then redis.call('hdel', lock, owner) end
redis.call('del', markers .. ':' .. (left + 1))
if redis.call('hlen', lock) > 1 then
  -- The hash lives as long as the longest-lived marker of any holder.
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', lock)) do
    local holds = tonumber(redis.call('hget', lock, field))
    if holds then
      for i = holds, 1, -1 do
        local ttl = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. i)
        if ttl > longest then longest = ttl end
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', lock, longest)
    return 0
  end
  if redis.call('hget', lock, 'mode') == 'write' then
    return 0
  end
end
redis.call('del', lock)
redis.call(publish, channel, message)
return 1
