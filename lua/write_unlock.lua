-- Release one write hold, Redisson's way, with an unlock latch (docs/wire-format.md,
-- "Read/write lock", "The unlock latch"): used for unlocks with a caller's request id.
-- KEYS[1] = lock hash, KEYS[2] = channel, KEYS[3] = unlock latch
-- ARGV[1] = message ("1"), ARGV[2] = lease in ms kept on a partial release,
-- ARGV[3] = write field, ARGV[4] = "publish" or "spublish" (both: "publish spublish"), ARGV[5] = latch TTL.
-- Returns 1 when the write lock was freed, 0 when holds remain, nil when not
-- held (a missing hash still publishes and latches 1, as Redisson does).
local replay = redis.call('get', KEYS[3])
if replay then
  return tonumber(replay)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  for cmd in string.gmatch(ARGV[4], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
  redis.call('set', KEYS[3], 1, 'px', ARGV[5])
  return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  for cmd in string.gmatch(ARGV[4], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
