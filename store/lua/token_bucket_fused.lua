-- token_bucket, one window: the whole script of a single token_bucket
-- window, in straight-line code (TokenDecideFused, TokenLevel and
-- ClampedElapsed in algorithms/decide.cc). It uses nothing from clock.lua or
-- prelude.lua: Lua 5.1 allocates a new closure for every function a script
-- defines, on every call, and this script defines none. (Several windows
-- with token_bucket among them go through decide.lua and token_bucket.lua.)
-- KEYS[1]: the state, level and last_ms as two little-endian doubles
-- (struct.pack('<dd'); both are integers below 2^53, so exact), which Redis
-- reads and writes in about half the time of the text "level last_ms".
-- ARGV: now_ms ("" = Redis TIME), cost, min_ttl_ms, limit, window_ms, burst.
-- Returns a string (cheaper for Redis to reply and for the gateway to read
-- than decide.lua's 7-element array): "1 remaining reset_ms" when allowed,
-- "0 remaining reset_ms retry_after_ms" when not; delay_ms and window are 0,
-- window_reset_ms is reset_ms.
local t
if ARGV[1] ~= '' then
  t = tonumber(ARGV[1])
else
  local now = redis.call('TIME')
  t = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
local cost, min_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local limit, window, burst = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local full = burst * window
-- A new key starts full.
local level, last = full, t
local state = redis.call('GET', KEYS[1])
if state then
  -- Anything but 16 bytes is not this script's state: an error, never a
  -- misread (state of another format lives under other keys, see
  -- LimitSpec::kStateFormat).
  if #state ~= 16 then return redis.error_reply('tollgate: unexpected state at ' .. KEYS[1]) end
  level, last = struct.unpack('<dd', state)
end
-- TokenLevel: refill for the elapsed time, clamped to [0, cap].
local cap = math.floor(((burst + 1) * window + limit - 1) / limit) + 1
local elapsed = t - last
if elapsed < 0 then elapsed = 0 elseif elapsed > cap then elapsed = cap end
level = math.min(full, level + elapsed * limit)
local need = cost * window
local allowed = level >= need
local retry_after = 0
if allowed then
  level = level - need
  if t > last then last = t end
else
  retry_after = math.floor((need - level + limit - 1) / limit)
end
local remaining = math.floor(level / window)
local reset = math.floor((full - level + limit - 1) / limit)
if allowed then
  -- The state lives until the bucket is full again: reset, at least
  -- min_ttl and 1 ms (as ttl() in prelude.lua).
  local ttl = math.max(reset, min_ttl, 1)
  redis.call('SET', KEYS[1], struct.pack('<dd', level, last), 'PX', string.format('%d', ttl))
  return string.format('1 %d %d', remaining, reset)
end
return string.format('0 %d %d %d', remaining, reset, retry_after)
