-- tollgate: one in-flight place of a rule key (max_inflight), as a lease that
-- expires: a sorted set of lease ids scored by their expiry, so a gateway
-- that dies loses only its own places, after inflight_ttl.
-- KEYS: the key's lease set. ARGV: now_ms ("" = the server's TIME), max,
-- ttl_ms, lease id. Returns 1 (the lease is held) or 0 (max are in flight).
local t = now_ms(ARGV[1])
local max = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', t))
if redis.call('ZCARD', KEYS[1]) >= max then return 0 end
redis.call('ZADD', KEYS[1], string.format('%d', t + ttl), ARGV[4])
redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl))
return 1
