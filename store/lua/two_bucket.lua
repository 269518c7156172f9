-- two_bucket: two fixed windows, the previous one weighted by the part of it
-- still inside the sliding window. State: "idx curr prev".
ALG.two_bucket = {
  load = function(p, w, t)
    local index, curr, prev = unpack_ints(redis.call('GET', w.key))
    if index then return {index = index, curr = curr, prev = prev} end
    return {index = floor_div(t, p.window), curr = 0, prev = 0}
  end,
  -- The counts as seen at t: {index, elapsed, curr, prev}.
  carry_forward = function(p, s, t)
    local index = floor_div(t, p.window)
    local c = {index = index, elapsed = t - index * p.window, curr = 0, prev = 0}
    if s.index == index then
      c.curr = s.curr
      c.prev = s.prev
    elseif s.index == index - 1 then
      c.prev = s.curr
    end
    return c
  end,
  allows = function(p, c, cost)
    local w = p.window
    return (c.curr + cost) * w + c.prev * (w - c.elapsed) <= p.limit * w
  end,
  -- Closed form of the smallest d >= 1 that passes at t + d: later in this
  -- window, else in the next, else the one after.
  retry_after = function(p, s, t, cost)
    local c = ALG.two_bucket.carry_forward(p, s, t)
    if ALG.two_bucket.allows(p, c, cost) then return 0 end
    local w = p.window
    local to_boundary = w - c.elapsed
    local slack = p.limit * w - (c.curr + cost) * w
    if slack >= 0 and c.prev > 0 then
      local d = math.max(1, to_boundary - math.floor(slack / c.prev))
      if d < to_boundary then return d end
    end
    if c.curr == 0 then return to_boundary end
    local e_next = math.max(0, w - math.floor((p.limit - cost) * w / c.curr))
    if e_next < w then return to_boundary + e_next end
    return to_boundary + w
  end,
  consume = function(p, s, t, cost)
    local c = ALG.two_bucket.carry_forward(p, s, t)
    if c.index > s.index then
      s.index = c.index
      s.curr = c.curr
      s.prev = c.prev
    end
    s.curr = s.curr + cost
    return 0
  end,
  peek = function(p, s, t)
    local c = ALG.two_bucket.carry_forward(p, s, t)
    local w = p.window
    local remaining = math.max(0, floor_div(p.limit * w - c.prev * (w - c.elapsed), w) - c.curr)
    local reset = 0
    if c.curr > 0 then
      reset = (c.index + 2) * w - t
    elseif c.prev > 0 then
      reset = (c.index + 1) * w - t
    end
    return remaining, reset
  end,
  save = function(p, w, s, reset_ms, min_ttl)
    redis.call('SET', w.key, int(s.index) .. ' ' .. int(s.curr) .. ' ' .. int(s.prev),
               'PX', ttl(reset_ms, min_ttl))
  end,
}
