-- sliding_log: the allowed unit requests of the window (t - W, t], as a list
-- of runs "ts count" (oldest first) in the window's key, and the number of
-- units in the list in its second key.
ALG.sliding_log = {
  load = function(p, w, t)
    local s = {key = w.key, runs = {}, len = redis.call('LLEN', w.key)}
    local units = tonumber(redis.call('GET', w.aux) or '')
    if not units then
      units = 0
      for i = 0, s.len - 1 do units = units + ALG.sliding_log.run(s, i)[2] end
    end
    s.units = units
    -- Drop (lazily) every run with ts <= t - W.
    s.first_live = 0
    s.expired = 0
    while s.first_live < s.len do
      local run = ALG.sliding_log.run(s, s.first_live)
      if run[1] > t - p.window then break end
      s.expired = s.expired + run[2]
      s.first_live = s.first_live + 1
    end
    return s
  end,
  -- Run i (0-based) of the stored list, read 32 at a time.
  run = function(s, i)
    if not s.runs[i] then
      local chunk = redis.call('LRANGE', s.key, i, i + 31)
      for k = 1, #chunk do s.runs[i + k - 1] = {unpack_ints(chunk[k])} end
    end
    return s.runs[i]
  end,
  retry_after = function(p, s, t, cost)
    local n = s.units - s.expired
    if n + cost <= p.limit then return 0 end
    -- log[k - 1], the k-th oldest kept unit, leaves the window at log[k-1] + W.
    local k = n + cost - p.limit
    local seen = 0
    for i = s.first_live, s.len - 1 do
      local run = ALG.sliding_log.run(s, i)
      seen = seen + run[2]
      if seen >= k then return run[1] + p.window - t end
    end
    return p.window
  end,
  consume = function(p, s, t, cost)
    s.units = s.units - s.expired
    s.expired = 0
    s.cost = cost
    s.t = t
    return 0
  end,
  peek = function(p, s, t)
    if s.cost then
      -- The newest run is now at t or, after a clock step back, later.
      local newest = t
      if s.first_live < s.len then
        newest = math.max(t, ALG.sliding_log.run(s, s.len - 1)[1])
      end
      return p.limit - (s.units + s.cost), newest + p.window - t
    end
    local n = s.units - s.expired
    local reset = 0
    if n > 0 then reset = ALG.sliding_log.run(s, s.len - 1)[1] + p.window - t end
    return p.limit - n, reset
  end,
  save = function(p, w, s, reset_ms, min_ttl)
    if s.first_live > 0 then redis.call('LTRIM', w.key, s.first_live, -1) end
    -- A clock that steps back must not unsort the log: such a request is
    -- recorded at the newest timestamp.
    local last = nil
    if s.first_live < s.len then last = ALG.sliding_log.run(s, s.len - 1) end
    if last and last[1] >= s.t then
      redis.call('LSET', w.key, -1, int(last[1]) .. ' ' .. int(last[2] + s.cost))
    else
      redis.call('RPUSH', w.key, int(s.t) .. ' ' .. int(s.cost))
    end
    local px = ttl(reset_ms, min_ttl)
    redis.call('SET', w.aux, int(s.units + s.cost), 'PX', px)
    redis.call('PEXPIRE', w.key, px)
  end,
}
