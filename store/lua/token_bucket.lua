-- token_bucket: capacity B tokens refilled at L per W ms; one token = W units.
-- State: "level last_ms". A new key starts full.

-- The state and the refill as plain values: the fused path below builds no
-- table for them.
local function token_read(key, full, t)
  local level, last = unpack_ints(redis.call('GET', key))
  if level then return level, last end
  return full, t
end
local function token_write(key, level, last, ttl_ms)
  redis.call('SET', key, int(level) .. ' ' .. int(last), 'PX', ttl_ms)
end
local function token_level(p, level, last, t)
  return math.min(p.burst * p.window, level + clamped_elapsed(p, last, t) * p.limit)
end

-- The single-window decision in one pass (TokenDecideFused in
-- algorithms/decide.cc): the level is computed once. KEYS[1]: the state;
-- ARGV[6..8]: limit, window_ms, burst. Returns what decide.lua returns.
local function token_bucket_fused(t, cost, min_ttl)
  local p = {limit = tonumber(ARGV[6]), window = tonumber(ARGV[7]), burst = tonumber(ARGV[8])}
  local s_level, s_last = token_read(KEYS[1], p.burst * p.window, t)
  local level = token_level(p, s_level, s_last, t)
  local need = cost * p.window
  local allowed = level >= need
  local retry_after = 0
  if allowed then
    level = level - need
    s_level = level
    s_last = math.max(s_last, t)
  else
    retry_after = ceil_div(need - level, p.limit)
  end
  local remaining = math.floor(level / p.window)
  local reset = ceil_div(p.burst * p.window - level, p.limit)
  if allowed then
    token_write(KEYS[1], s_level, s_last, ttl(reset, min_ttl))
    return {1, remaining, 0, 0, reset, 0, reset}
  end
  return {0, remaining, retry_after, 0, reset, 0, reset}
end

-- A single token_bucket window is decided here, before the general path's
-- functions (ALG below, decide.lua) are even created: each would be a new
-- closure on every call.
if count == 1 and ARGV[5] == 'token_bucket' then return token_bucket_fused(t, cost, min_ttl) end

ALG.token_bucket = {
  load = function(p, w, t)
    local level, last = token_read(w.key, p.burst * p.window, t)
    return {level = level, last = last}
  end,
  level = function(p, s, t)
    return token_level(p, s.level, s.last, t)
  end,
  retry_after = function(p, s, t, cost)
    local level = ALG.token_bucket.level(p, s, t)
    local need = cost * p.window
    if level >= need then return 0 end
    return ceil_div(need - level, p.limit)
  end,
  consume = function(p, s, t, cost)
    s.level = ALG.token_bucket.level(p, s, t) - cost * p.window
    s.last = math.max(s.last, t)
    return 0
  end,
  peek = function(p, s, t)
    local level = ALG.token_bucket.level(p, s, t)
    return math.floor(level / p.window), ceil_div(p.burst * p.window - level, p.limit)
  end,
  save = function(p, w, s, reset_ms, min_ttl)
    token_write(w.key, s.level, s.last, ttl(reset_ms, min_ttl))
  end,
}
