-- sub_window: N sub-windows of S = W / N ms; the window is the last N of them.
-- State: a hash of sub-window index -> count, and "n" = the newest sub-window
-- written (a clock that steps back counts into it, as the local store does).
ALG.sub_window = {
  load = function(p, w, t)
    local s = {counts = {}, stale = {}, added = 0}
    local sub_ms = p.window / p.sub_windows
    local fields = redis.call('HGETALL', w.key)
    s.newest = floor_div(t, sub_ms)
    for i = 1, #fields, 2 do
      if fields[i] == 'n' then
        s.newest = tonumber(fields[i + 1])
      else
        s.counts[tonumber(fields[i])] = tonumber(fields[i + 1])
      end
    end
    return s
  end,
  -- The stored sub-windows inside the window that ends with `index`.
  bounds = function(p, s, index)
    return math.max(index, s.newest) - p.sub_windows + 1, math.min(index, s.newest)
  end,
  total = function(p, s, index)
    local lo, hi = ALG.sub_window.bounds(p, s, index)
    local total = 0
    for j = lo, hi do total = total + (s.counts[j] or 0) end
    return total
  end,
  retry_after = function(p, s, t, cost)
    local n = p.sub_windows
    local sub_ms = p.window / n
    local index = floor_div(t, sub_ms)
    local total = ALG.sub_window.total(p, s, index)
    if total + cost <= p.limit then return 0 end
    -- Sub-window j leaves the window at (j + N) * S; walk the oldest first.
    local lo, hi = ALG.sub_window.bounds(p, s, index)
    for j = lo, hi do
      total = total - (s.counts[j] or 0)
      if total <= p.limit - cost then return (j + n) * sub_ms - t end
    end
    return (index + n) * sub_ms - t
  end,
  consume = function(p, s, t, cost)
    local index = floor_div(t, p.window / p.sub_windows)
    if index > s.newest then s.newest = index end
    s.counts[s.newest] = (s.counts[s.newest] or 0) + cost
    s.added = cost
    return 0
  end,
  peek = function(p, s, t)
    local n = p.sub_windows
    local sub_ms = p.window / n
    local index = floor_div(t, sub_ms)
    local lo, hi = ALG.sub_window.bounds(p, s, index)
    local total = 0
    local newest_used = lo - 1
    for j = lo, hi do
      local count = s.counts[j] or 0
      if count > 0 then
        total = total + count
        newest_used = j
      end
    end
    local reset = 0
    if newest_used >= lo then reset = (newest_used + n) * sub_ms - t end
    return math.max(0, p.limit - total), reset
  end,
  -- Deletes the sub-windows that left the window and stores `newest`.
  drop_stale = function(p, w, s)
    local stale = {}
    for j, _ in pairs(s.counts) do
      if j <= s.newest - p.sub_windows then stale[#stale + 1] = int(j) end
    end
    if #stale > 0 then redis.call('HDEL', w.key, unpack(stale)) end
    redis.call('HSET', w.key, 'n', int(s.newest))
  end,
  save = function(p, w, s, reset_ms, min_ttl)
    ALG.sub_window.drop_stale(p, w, s)
    redis.call('HINCRBY', w.key, int(s.newest), s.added)
    redis.call('PEXPIRE', w.key, ttl(reset_ms, min_ttl))
  end,
}
