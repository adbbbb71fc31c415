-- A read-only snapshot of one Redisson lock of any kind, taken atomically
-- (this crate's own script, for Client::inspect; it writes nothing).
-- KEYS[1] = lock hash <name>, KEYS[2] = fair queue redisson_lock_queue:{<name>},
-- KEYS[3] = fair deadlines redisson_lock_timeout:{<name>},
-- KEYS[4] = fenced token redisson_lock_token:{<name>},
-- KEYS[5] = a permit-expirable semaphore's permits {<name>}:timeout.
-- ARGV[1] = the read markers' key prefix ({<name>}, or <name> when it has a
-- `{`): a reader's marker n is <prefix>:<field>:rwlock_timeout:<n>, in the
-- lock's slot, as Redisson's read scripts build it.
-- ARGV[2] = the most markers read per reader field (a bound on the loop
-- for a hash whose counts are not a lock's).
-- ARGV[3] = the most permits read from KEYS[5].
-- Returns { server ms, type of each of the 4 keys (4 strings), PTTL of the
-- hash, HGETALL of the hash, {queue entry, its score or nil, ...},
-- token or nil, {reader field, {PTTL of marker 1..n}, ...}, type of KEYS[5],
-- the counter (GET of a string <name>) or nil, {permit id, its score, ...}
-- (only with a string <name>) }. Keys of
-- a type no Redisson lock gives them are reported by type, not read.
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local types = {}
for i = 1, 5 do
  types[i] = redis.call('type', KEYS[i])['ok']
end
local pttl = -2
local hash = {}
local markers = {}
local counter = false
local permits = {}
if types[1] == 'string' then
  pttl = redis.call('pttl', KEYS[1])
  counter = redis.call('get', KEYS[1])
  if types[5] == 'zset' then
    permits = redis.call('zrange', KEYS[5], 0, tonumber(ARGV[3]) - 1, 'withscores')
  end
end
if types[1] == 'hash' then
  pttl = redis.call('pttl', KEYS[1])
  hash = redis.call('hgetall', KEYS[1])
  if redis.call('hexists', KEYS[1], 'mode') == 1 then
    local most = tonumber(ARGV[2])
    for i = 1, #hash, 2 do
      local field = hash[i]
      local count = tonumber(hash[i + 1])
      if field ~= 'mode' and string.sub(field, -6) ~= ':write' and count ~= nil then
        local ttls = {}
        for n = 1, math.min(count, most) do
          ttls[n] = redis.call('pttl', ARGV[1] .. ':' .. field .. ':rwlock_timeout:' .. n)
        end
        markers[#markers + 1] = field
        markers[#markers + 1] = ttls
      end
    end
  end
end
local queue = {}
if types[2] == 'list' then
  local entries = redis.call('lrange', KEYS[2], 0, -1)
  for i = 1, #entries do
    local score = false
    if types[3] == 'zset' then
      score = redis.call('zscore', KEYS[3], entries[i])
    end
    queue[#queue + 1] = entries[i]
    queue[#queue + 1] = score
  end
end
local token = false
if types[4] == 'string' then
  token = redis.call('get', KEYS[4])
end
return {now, types[1], types[2], types[3], types[4], pttl, hash, queue, token, markers,
  types[5], counter, permits}
