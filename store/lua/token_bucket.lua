-- token_bucket: capacity B tokens refilled at L per W ms; one token = W units.
-- State: "level last_ms". A new key starts full.
ALG.token_bucket = {
  load = function(p, w, t)
    local v = unpack_ints(redis.call('GET', w.key))
    if v then return {level = v[1], last = v[2]} end
    return {level = p.burst * p.window, last = t}
  end,
  level = function(p, s, t)
    return math.min(p.burst * p.window, s.level + clamped_elapsed(p, s.last, t) * p.limit)
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
    redis.call('SET', w.key, int(s.level) .. ' ' .. int(s.last), 'PX', ttl(reset_ms, min_ttl))
  end,
}

-- The single-window decision in one pass (TokenDecideFused in
-- algorithms/decide.cc): the level is computed once. KEYS[1]: the state;
-- ARGV[6..8]: limit, window_ms, burst. Returns what decide.lua returns.
FUSED.token_bucket = function(t, cost, min_ttl)
  local p = {limit = tonumber(ARGV[6]), window = tonumber(ARGV[7]), burst = tonumber(ARGV[8])}
  local w = {key = KEYS[1]}
  local s = ALG.token_bucket.load(p, w, t)
  local level = ALG.token_bucket.level(p, s, t)
  local need = cost * p.window
  local allowed = level >= need
  local retry_after = 0
  if allowed then
    level = level - need
    s.level = level
    s.last = math.max(s.last, t)
  else
    retry_after = ceil_div(need - level, p.limit)
  end
  local remaining = math.floor(level / p.window)
  local reset = ceil_div(p.burst * p.window - level, p.limit)
  if allowed then
    ALG.token_bucket.save(p, w, s, reset, min_ttl)
    return {1, remaining, 0, 0, reset, 0, reset}
  end
  return {0, remaining, retry_after, 0, reset, 0, reset}
end
