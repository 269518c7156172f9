-- token_bucket, one window: the whole script of a single token_bucket
-- window, in straight-line code (TokenDecideFused, TokenLevel and
-- ClampedElapsed in algorithms/decide.cc). It uses nothing from clock.lua or
-- prelude.lua: Lua 5.1 allocates a new closure for every function a script
-- defines, on every call, and this script defines none. (Several windows
-- with token_bucket among them go through decide.lua and token_bucket.lua.)
-- KEYS: one or more states (distinct keys of one limit), each level and
-- last_ms as two little-endian doubles (struct.pack('<dd'); both are
-- integers below 2^53, so exact), which Redis reads and writes in about
-- half the time of the text "level last_ms".
-- ARGV: now_ms ("" = Redis TIME), min_ttl_ms, limit, window_ms, burst, then
-- for each key in KEYS order the number of its decisions and their costs,
-- decided one after the other at the same now_ms exactly as that many calls
-- of one decision each would be (the gateway batches the concurrent
-- decisions of one limit into one call).
-- Returns a string (cheaper for Redis to reply and for the gateway to read
-- than decide.lua's array): per decision, in ARGV order, "1 remaining
-- reset_ms" when allowed, "0 remaining reset_ms retry_after_ms" when not,
-- separated by ','; delay_ms and window are 0, window_reset_ms is
-- reset_ms.
local t
if ARGV[1] ~= '' then
  t = tonumber(ARGV[1])
else
  local now = redis.call('TIME')
  t = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
local min_ttl = tonumber(ARGV[2])
local limit, window, burst = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local full = burst * window
local cap = math.floor((2 * (burst + 1) * window + limit - 1) / limit) + 1
local replies = {}
local a = 6  -- the next argument: a key's number of decisions
for k = 1, #KEYS do
  -- The stored state; a new key starts full.
  local level, last = full, t
  local state = redis.call('GET', KEYS[k])
  if state then
    -- Anything but 16 bytes is not this script's state: an error, never a
    -- misread (state of another format lives under other keys, see
    -- LimitSpec::kStateFormat).
    if #state ~= 16 then return redis.error_reply('tollgate: unexpected state at ' .. KEYS[k]) end
    level, last = struct.unpack('<dd', state)
  end
  local ttl = nil  -- of the state after the last allowed decision: written once, at the end
  local n = tonumber(ARGV[a])
  for i = a + 1, a + n do
    local cost = tonumber(ARGV[i])
    -- TokenLevel: refill for the elapsed time, clamped to [0, cap].
    local elapsed = t - last
    if elapsed < 0 then elapsed = 0 elseif elapsed > cap then elapsed = cap end
    local now_level = math.min(full, level + elapsed * limit)
    local need = cost * window
    local allowed = now_level >= need
    local retry_after = 0
    if allowed then
      now_level = now_level - need
      level = now_level
      if t > last then last = t end
    else
      retry_after = math.floor((need - now_level + limit - 1) / limit)
    end
    local remaining = math.max(0, math.floor(now_level / window))
    local reset = math.floor((full - now_level + limit - 1) / limit)
    if allowed then
      -- The state lives until the bucket is full again: reset, at least
      -- min_ttl and 1 ms (as ttl() in prelude.lua).
      ttl = math.max(reset, min_ttl, 1)
      replies[#replies + 1] = string.format('1 %d %d', remaining, reset)
    else
      replies[#replies + 1] = string.format('0 %d %d %d', remaining, reset, retry_after)
    end
  end
  a = a + n + 1
  if ttl then
    redis.call('SET', KEYS[k], struct.pack('<dd', level, last), 'PX', string.format('%d', ttl))
  end
end
return table.concat(replies, ',')
