-- tollgate: a script's time in ms: `arg` as the caller gave it, or Redis
-- TIME when `arg` is '' (every gateway then shares Redis's clock).
local function now_ms(arg)
  if arg ~= '' then return tonumber(arg) end
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
