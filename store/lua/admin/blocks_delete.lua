-- tollgate: removes a block (the admin API's DELETE /api/v1/blocks).
-- KEYS: the blocks hash, its version counter. ARGV: the id. Returns 1 when
-- the block was there (the version then moves on), else 0.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('INCR', KEYS[2])
return 1
