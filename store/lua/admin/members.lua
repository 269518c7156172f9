-- tollgate: one gateway's heartbeat into the membership of the fleet that
-- shares this Redis (on_error = "share" divides every limit by its size).
-- KEYS: the members sorted set (member: a gateway's id; score: the Unix ms
-- at which its membership ends). ARGV: the id, how long the membership
-- lasts in ms (0: the gateway leaves). On Redis's own clock (TIME), so that
-- the gateways' clocks need not agree. Members whose time is over are
-- dropped. Returns {the live members, this one included; Redis's TIME in
-- ms}, from which a gateway learns where Redis's windows are.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lasts = tonumber(ARGV[2])
if lasts > 0 then
  redis.call('ZADD', KEYS[1], now + lasts, ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
-- The set lives as long as its latest member; a leaving gateway leaves the
-- others' time as it is.
if lasts > 0 then redis.call('PEXPIRE', KEYS[1], lasts) end
return {redis.call('ZCARD', KEYS[1]), now}
