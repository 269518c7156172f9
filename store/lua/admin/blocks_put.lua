-- tollgate: adds or replaces entries of an admin hash shared by every
-- gateway on this Redis: the blocks (PUT /api/v1/blocks) or the overrides
-- (PUT /api/v1/overrides), each in a hash of its own.
-- KEYS: the hash (field: the entry's id, value: "<expires_unix_ms> <the
-- entry as JSON>"), its version counter. ARGV: id, value, id, value, ...
-- Entries over are dropped by blocks_read.lua. Returns the new version.
for i = 1, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return redis.call('INCR', KEYS[2])
