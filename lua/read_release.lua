-- Release read holds of a Redisson read lock by this crate's own guard (the
-- lock state of docs/wire-format.md, "Read/write lock", idempotent without an unlock latch).
-- KEYS[1] = lock hash, KEYS[2] = channel redisson_rwlock:{<name>},
-- KEYS[3] = the caller's marker prefix (see read_acquire.lua),
-- KEYS[4] = the key prefix {<name>} (or <name> when it contains '{').
-- ARGV[1] = unlock message ("0"), ARGV[2] = reader field,
-- ARGV[3] = "publish" or "spublish" (both: "publish spublish"), ARGV[4] = the read holds the caller
-- keeps (0: none).
-- The count is set to ARGV[4] and the markers above it are deleted, so the
-- same release sent again after a lost reply changes nothing more.
-- Then Redisson's rule: while the hash has other fields, it lives as long as
-- the longest-lived marker of ANY holder (Java's too); when none lives (and
-- no writer holds it), it is deleted and `0` is published.
-- Returns 1 when the hash was deleted, {0, ttl} when it remains with the TTL
-- in ms it now has, 0 when it remains untouched (a writer holds it), nil when
-- the caller holds no read hold.
local current = redis.call('hget', KEYS[1], ARGV[2])
if current == false then
  return nil
end
current = tonumber(current) or 0
local remaining = tonumber(ARGV[4])
for i = remaining + 1, current do
  redis.call('del', KEYS[3] .. ':' .. i)
end
if remaining > 0 then
  redis.call('hset', KEYS[1], ARGV[2], remaining)
else
  redis.call('hdel', KEYS[1], ARGV[2])
end
if redis.call('hlen', KEYS[1]) > 1 then
  local ttl = -3
  local all = redis.call('hgetall', KEYS[1])
  for i = 1, #all, 2 do
    local count = tonumber(all[i + 1])
    if count ~= nil then
      for n = count, 1, -1 do
        local left = redis.call('pttl', KEYS[4] .. ':' .. all[i] .. ':rwlock_timeout:' .. n)
        ttl = math.max(ttl, left)
      end
    end
  end
  if ttl > 0 then
    redis.call('pexpire', KEYS[1], ttl)
    return {0, ttl}
  end
  if redis.call('hget', KEYS[1], 'mode') == 'write' then
    return 0
  end
end
redis.call('del', KEYS[1])
for cmd in string.gmatch(ARGV[3], "%S+") do redis.call(cmd, KEYS[2], ARGV[1]) end
return 1
