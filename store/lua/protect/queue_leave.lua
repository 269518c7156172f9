-- tollgate: a waiting request runs, is refused, or its client left.
-- KEYS: the key's waiting counter. Never below zero (it may have expired).
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then return redis.call('DECR', KEYS[1]) end
return 0
