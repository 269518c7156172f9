-- tollgate: removes an entry of an admin hash (DELETE /api/v1/blocks or
-- /api/v1/overrides; see blocks_put.lua).
-- KEYS: the hash, its version counter. ARGV: the id. Returns 1 when
-- the entry was there (the version then moves on), else 0.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
return 1
