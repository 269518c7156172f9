-- token_bucket: capacity B tokens refilled at L per W ms; one token = W units.
-- State: "level last_ms". A new key starts full.

-- A single window is decided by token_bucket_fused.lua instead.
ALG.token_bucket = {
  load = function(p, w, t)
    local level, last = unpack_ints(redis.call('GET', w.key))
    if level then return {level = level, last = last} end
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
    -- 0 while a settle's debt keeps the level below empty.
    return math.max(0, math.floor(level / p.window)), ceil_div(p.burst * p.window - level, p.limit)
  end,
  save = function(p, w, s, reset_ms, min_ttl)
    redis.call('SET', w.key, int(s.level) .. ' ' .. int(s.last), 'PX', ttl(reset_ms, min_ttl))
  end,
  -- A single token_bucket window keeps token_bucket_fused.lua's state:
  -- level and last_ms as two packed doubles. For the scripts other than
  -- decisions that read or write it (key_peek.lua, settle.lua).
  load_packed = function(p, w, t)
    local packed = redis.call('GET', w.key)
    if packed and #packed == 16 then
      local level, last = struct.unpack('<dd', packed)
      return {level = level, last = last}
    end
    return {level = p.burst * p.window, last = t}
  end,
  save_packed = function(w, s, reset_ms, min_ttl)
    redis.call('SET', w.key, struct.pack('<dd', s.level, s.last), 'PX', ttl(reset_ms, min_ttl))
  end,
}
