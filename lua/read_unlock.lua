-- Release one read hold, Redisson's way, with an unlock latch (docs/wire-format.md,
-- "Read/write lock", "The unlock latch"): used for unlocks with a caller's request id.
-- KEYS[1] = lock hash, KEYS[2] = channel, KEYS[3] = the caller's marker
-- prefix, KEYS[4] = the key prefix, KEYS[5] = unlock latch.
-- ARGV[1] = unlock message ("0"), ARGV[2] = reader field,
-- ARGV[3] = "publish" or "spublish" (both: "publish spublish"), ARGV[4] = latch TTL in ms.
-- Returns 1 when the hash was deleted, 0 when it remains, nil when not held
-- (a missing hash still publishes and latches 1, as Redisson does).
local replay = redis.call('get', KEYS[5])
if replay then
  return tonumber(replay)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  for cmd in string.gmatch(ARGV[3], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
  redis.call('set', KEYS[5], 1, 'px', ARGV[4])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count == 0 then
  redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (count + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local ttl = -3
  local all = redis.call('hgetall', KEYS[1])
  for i = 1, #all, 2 do
    local held = tonumber(all[i + 1])
    if held ~= nil then
      for n = held, 1, -1 do
        local left = redis.call('pttl', KEYS[4] .. ':' .. all[i] .. ':rwlock_timeout:' .. n)
        ttl = math.max(ttl, left)
      end
    end
  end
  if ttl > 0 then
    redis.call('pexpire', KEYS[1], ttl)
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
  end
end
redis.call('del', KEYS[1])
for cmd in string.gmatch(ARGV[3], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
