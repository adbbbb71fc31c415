-- Redisson's read-lock isLocked (docs/wire-format.md, "Read/write lock"): 1 when the mode is read,
-- or write with more than two fields (the writer also holds read holds).
-- KEYS[1] = lock hash.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
  return 1
end
return 0
