-- tollgate: an admin hash (blocks or overrides, see blocks_put.lua), for a
-- gateway's refresh. KEYS: the hash, its version counter. ARGV: the
-- version the gateway holds and, when it holds entries that are over,
-- now_unix_ms: entries over by then are dropped first (the version then
-- moves on). Returns {version} when it has not moved, else {version,
-- value, value, ...} (the hash's values).
if ARGV[2] and ARGV[2] ~= '' then
  local now = tonumber(ARGV[2])
  local all = redis.call('HGETALL', KEYS[1])
  local dropped = 0
  for i = 1, #all, 2 do
    local expires = tonumber(string.match(all[i + 1], '^(%d+) '))
    if not expires or expires <= now then
      redis.call('HDEL', KEYS[1], all[i])
      dropped = dropped + 1
    end
  end
  if dropped > 0 then redis.call('INCR', KEYS[2]) end
end
local version = tonumber(redis.call('GET', KEYS[2]) or '0')
if version == tonumber(ARGV[1]) then return {version} end
local reply = {version}
for _, value in ipairs(redis.call('HVALS', KEYS[1])) do reply[#reply + 1] = value end
return reply
