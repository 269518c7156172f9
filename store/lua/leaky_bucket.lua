-- leaky_bucket: a queue draining L requests per W ms, holding at most B
-- waiting; one request = W units. State: "level last_ms". A new key is empty.
ALG.leaky_bucket = {
  load = function(p, w, t)
    local level, last = unpack_ints(redis.call('GET', w.key))
    if level then return {level = level, last = last} end
    return {level = 0, last = t}
  end,
  level = function(p, s, t)
    return math.max(0, s.level - clamped_elapsed(p, s.last, t) * p.limit)
  end,
  retry_after = function(p, s, t, cost)
    local level = ALG.leaky_bucket.level(p, s, t)
    local over = level + (cost - 1) * p.window - p.burst * p.window
    if over <= 0 then return 0 end
    return ceil_div(over, p.limit)
  end,
  consume = function(p, s, t, cost)
    s.level = ALG.leaky_bucket.level(p, s, t) + cost * p.window
    s.last = math.max(s.last, t)
    if p.nodelay == 1 then return 0 end
    return ceil_div(s.level - p.window, p.limit)
  end,
  peek = function(p, s, t)
    local level = ALG.leaky_bucket.level(p, s, t)
    local capacity = p.burst * p.window
    local remaining = 0
    if level <= capacity then remaining = math.floor((capacity - level) / p.window) + 1 end
    return remaining, ceil_div(level, p.limit)
  end,
  save = function(p, w, s, reset_ms, min_ttl)
    redis.call('SET', w.key, int(s.level) .. ' ' .. int(s.last), 'PX', ttl(reset_ms, min_ttl))
  end,
}
