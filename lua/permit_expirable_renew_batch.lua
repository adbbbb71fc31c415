-- Renew a batch of this client's renewed permit sets (docs/wire-format.md,
-- "Batched renewal"; docs/synchronizers.md, "Renewed permits").
-- KEYS[i] = a semaphore's {<name>}:timeout ZSET, ARGV[1] = lease in ms,
-- ARGV[2] = now (epoch ms, this host's clock, as every expiry of the
-- semaphore). Then, for each key in turn: the number of ids n, followed by
-- n pairs (the id's raw 16 bytes, the same id as 32-char hex text: how
-- Redisson up to 3.16.8 stores it; whichever member the ZSET has is renewed
-- and keeps its form).
-- As Redisson's updateLeaseTime, a permit whose score is <= now has expired
-- and is never revived (it is left for the next reclaiming script); one whose
-- score is in the future gets now + lease.
-- Returns one entry per key: 1 when every id of the set was held (each got
-- the new expiry), 0 when some id is gone or expired (the others are still
-- renewed, so that their holder can release them), -1 when the key is not a
-- ZSET (WRONGTYPE), which does not fail the rest of the batch.
local now = tonumber(ARGV[2])
local expiry = now + tonumber(ARGV[1])
local renewed = {}
local at = 3
for i, key in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  at = at + 1
  local state = 1
  for _ = 1, n do
    local member = ARGV[at]
    local score = redis.pcall('zscore', key, member)
    if type(score) == 'table' then
      state = -1
    elseif score == false then
      member = ARGV[at + 1]
      score = redis.call('zscore', key, member)
    end
    if state ~= -1 then
      if score ~= false and tonumber(score) > now then
        redis.call('zadd', key, 'XX', expiry, member)
      else
        state = 0
      end
    end
    at = at + 2
  end
  renewed[i] = state
end
return renewed
