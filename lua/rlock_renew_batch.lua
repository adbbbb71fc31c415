-- Renew a batch of held locks (PROTOCOL §10.2).
-- KEYS[i] = lock hash, ARGV[1] = lease in ms, ARGV[i + 1] = owner field of KEYS[i]
-- Returns one entry per key: 1 when the owner still holds it (its TTL is reset
-- to the lease), 0 when the owner's field is gone. A key that is no longer a
-- hash counts as gone rather than failing the whole batch.
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.pcall('hexists', key, ARGV[i + 1]) == 1 then
    redis.call('pexpire', key, ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
