-- tollgate: the check in front of an upstream whose limits were learned from
-- its headers; algorithms/learned.cc CheckLearned line for line, with Redis
-- expiries as the bucket's and the global block's expiry (server time).
-- KEYS: the upstream's global block, the bucket's remaining, its limit.
-- Returns 0 (go: counted) or the ms to wait before checking again.
local global_ttl = redis.call('PTTL', KEYS[1])
if global_ttl > 0 then return global_ttl end
local remaining = redis.call('GET', KEYS[2])
-- PTTL 0: the key expires this very millisecond, which Redis still reads
-- but ExpireLearned (expires_ms <= now_ms) has forgotten.
local ttl = redis.call('PTTL', KEYS[2])
if not remaining or ttl == 0 then
  local limit = tonumber(redis.call('GET', KEYS[3]) or '1')
  redis.call('SET', KEYS[2], string.format('%d', limit - 1))
  return 0
end
if tonumber(remaining) <= 0 then
  if ttl > 0 then return ttl end
  redis.call('PEXPIRE', KEYS[2], 1000)
  return 1000
end
redis.call('DECR', KEYS[2])
return 0
