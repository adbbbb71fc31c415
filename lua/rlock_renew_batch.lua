-- Renew a batch of held locks (docs/wire-format.md, "Batched renewal").
-- KEYS[i] = lock hash, ARGV[1] = lease in ms, ARGV[i + 1] = owner field of KEYS[i]
-- Returns one entry per key: 1 when the owner still holds it (its TTL is reset
-- to the lease), 0 when the owner's field is gone, -1 when the key is no longer
-- a hash (WRONGTYPE), which does not fail the rest of the batch.
local renewed = {}
for i, key in ipairs(KEYS) do
  local held = redis.pcall('hexists', key, ARGV[i + 1])
  if held == 1 then
    redis.call('pexpire', key, ARGV[1])
    renewed[i] = 1
  elseif type(held) == 'table' then
    renewed[i] = -1
  else
    renewed[i] = 0
  end
end
return renewed
