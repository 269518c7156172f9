-- token_bucket, one window: the whole decision in straight-line code
-- (TokenDecideFused, TokenLevel and ClampedElapsed in algorithms/decide.cc).
-- It comes first in the token_bucket script, before clock.lua and
-- prelude.lua: Lua 5.1 allocates a new closure for every function those
-- files define, on every call, and this path defines none.
-- KEYS[1]: the state, "level last_ms". ARGV as decide.lua reads them, with
-- one window: now_ms ("" = Redis TIME), cost, min_ttl_ms, 1, "token_bucket",
-- limit, window_ms, burst. Returns what decide.lua returns.
if ARGV[4] == '1' and ARGV[5] == 'token_bucket' then
  local t
  if ARGV[1] ~= '' then
    t = tonumber(ARGV[1])
  else
    local now = redis.call('TIME')
    t = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  end
  local cost, min_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
  local limit, window, burst = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  local full = burst * window
  -- A new key starts full.
  local level, last = full, t
  local state = redis.call('GET', KEYS[1])
  if state then
    local a, b = string.match(state, '^(%-?%d+) (%-?%d+) ?%-?%d*$')
    level, last = tonumber(a), tonumber(b)
  end
  -- TokenLevel: refill for the elapsed time, clamped to [0, cap].
  local cap = math.floor(((burst + 1) * window + limit - 1) / limit) + 1
  local elapsed = t - last
  if elapsed < 0 then elapsed = 0 elseif elapsed > cap then elapsed = cap end
  level = math.min(full, level + elapsed * limit)
  local need = cost * window
  if level >= need then
    level = level - need
    if t > last then last = t end
    local reset = math.floor((full - level + limit - 1) / limit)
    -- The state lives until the bucket is full again: reset, at least
    -- min_ttl and 1 ms (as ttl() in prelude.lua).
    local ttl = math.max(reset, min_ttl, 1)
    redis.call('SET', KEYS[1], string.format('%d %d', level, last), 'PX', string.format('%d', ttl))
    return {1, math.floor(level / window), 0, 0, reset, 0, reset}
  end
  local reset = math.floor((full - level + limit - 1) / limit)
  return {0, math.floor(level / window), math.floor((need - level + limit - 1) / limit), 0, reset, 0, reset}
end
