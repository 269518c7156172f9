-- tollgate: adds or replaces a block (the admin API's PUT /api/v1/blocks),
-- shared by every gateway on this Redis.
-- KEYS: the blocks hash (field: the block's id, value: "<expires_unix_ms>
-- <the block as JSON>"), its version counter. ARGV: now_unix_ms, the id,
-- the value. Blocks over by now are dropped on the way. Returns the new
-- version.
local now = tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires = tonumber(string.match(all[i + 1], '^(%d+) '))
  if not expires or expires <= now then redis.call('HDEL', KEYS[1], all[i]) end
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
return redis.call('INCR', KEYS[2])
