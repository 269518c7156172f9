-- tollgate: the blocks, for a gateway's refresh. KEYS: the blocks hash, its
-- version counter. ARGV: the version the gateway holds. Returns {version}
-- when it has not moved, else {version, value, value, ...} (the hash's
-- values, see blocks_put.lua).
local version = tonumber(redis.call('GET', KEYS[2]) or '0')
if version == tonumber(ARGV[1]) then return {version} end
local reply = {version}
for _, value in ipairs(redis.call('HVALS', KEYS[1])) do reply[#reply + 1] = value end
return reply
