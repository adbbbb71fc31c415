-- Renew a batch of this client's read holds (docs/wire-format.md, "Batched renewal", 4.4.0+): only
-- the caller's own markers, never another holder's.
-- KEYS[i] = lock hash, ARGV[1] = lease in ms, ARGV[2i] = reader field of
-- KEYS[i], ARGV[2i + 1] = its marker prefix (see read_acquire.lua).
-- Returns one entry per key: 1 when the reader still holds it (its markers
-- :1..count and the hash get the lease), 0 when its field is gone, -1 when
-- the key is no longer a hash.
local renewed = {}
for i, key in ipairs(KEYS) do
  local count = redis.pcall('hget', key, ARGV[2 * i])
  if type(count) == 'table' then
    renewed[i] = -1
  elseif count then
    for n = 1, tonumber(count) or 0 do
      redis.call('pexpire', ARGV[2 * i + 1] .. ':' .. n, ARGV[1])
    end
    redis.call('pexpire', key, ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
