-- fixed_window: count per window idx = floor(t / W). State: "idx count".
ALG.fixed_window = {
  load = function(p, w, t)
    local index, count = unpack_ints(redis.call('GET', w.key))
    if index then return {index = index, count = count} end
    return {index = floor_div(t, p.window), count = 0}
  end,
  count = function(s, index)
    if s.index == index then return s.count end
    return 0
  end,
  retry_after = function(p, s, t, cost)
    local index = floor_div(t, p.window)
    if ALG.fixed_window.count(s, index) + cost <= p.limit then return 0 end
    return (index + 1) * p.window - t
  end,
  consume = function(p, s, t, cost)
    local index = floor_div(t, p.window)
    if s.index ~= index then
      s.index = index
      s.count = 0
    end
    s.count = s.count + cost
    return 0
  end,
  peek = function(p, s, t)
    local index = floor_div(t, p.window)
    -- 0, not below, while a settle's charge counts above the limit.
    return math.max(0, p.limit - ALG.fixed_window.count(s, index)), (index + 1) * p.window - t
  end,
  save = function(p, w, s, reset_ms, min_ttl)
    redis.call('SET', w.key, int(s.index) .. ' ' .. int(s.count), 'PX', ttl(reset_ms, min_ttl))
  end,
}
