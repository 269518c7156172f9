-- tollgate: leases (docs/leases.md; algorithms/lease.cc is the C++ text).
-- Runs after prelude.lua and every algorithm's file: KEYS and ARGV begin as
-- decide.lua's (two keys per window, now, min_ttl, window count, six
-- parameters per window); lease_take.lua and lease_return.lua say what
-- follows.
local LEASE = {}

-- token_bucket, and leaky_bucket with nodelay (a token bucket of capacity
-- B + 1). State: "V last next_id" then "id g expiry" per outstanding lease,
-- sorted by expiry; V counts the leased units too. lease_take_fused.lua
-- repeats load, avail, take and save in straight-line code: change both.
LEASE.bucket = {
  capacity = function(p)
    if p.algorithm == 'leaky_bucket' then return p.burst + 1 end
    return p.burst
  end,
  -- clamped_elapsed of prelude.lua with the lease capacity for B.
  elapsed = function(p, last, t)
    local cap = ceil_div((LEASE.bucket.capacity(p) + 1) * p.window, p.limit) + 1
    local e = t - last
    if e < 0 then return 0 end
    if e > cap then return cap end
    return e
  end,
  refill = function(p, s, to)
    local full = LEASE.bucket.capacity(p) * p.window
    s.level = math.min(full, s.level + LEASE.bucket.elapsed(p, s.last, to) * p.limit)
    s.last = math.max(s.last, to)
  end,
  -- Loads and brings the state to t: expired leases count as spent.
  load = function(p, w, t)
    local s = {leases = {}, outstanding = 0}
    local value = redis.call('GET', w.key)
    if value then
      local n = {}
      for x in string.gmatch(value, '%-?%d+') do n[#n + 1] = tonumber(x) end
      s.level, s.last, s.next = n[1], n[2], n[3]
      for i = 4, #n, 3 do
        s.leases[#s.leases + 1] = {id = n[i], units = n[i + 1], expiry = n[i + 2]}
      end
    else
      s.level, s.last, s.next = LEASE.bucket.capacity(p) * p.window, t, 1
    end
    local kept = {}
    for _, l in ipairs(s.leases) do
      if l.expiry <= t then
        LEASE.bucket.refill(p, s, l.expiry)
        s.level = s.level - l.units * p.window
      else
        kept[#kept + 1] = l
        s.outstanding = s.outstanding + l.units
      end
    end
    s.leases = kept
    LEASE.bucket.refill(p, s, t)
    return s
  end,
  -- Units available (at least 0) and, when fewer than `need`, the wait
  -- for `need` (algorithms/lease.cc's BucketAvail).
  avail = function(p, s, t, need)
    local free = s.level - s.outstanding * p.window
    local avail = math.max(floor_div(free, p.window), 0)
    if avail >= need then return avail, 0 end
    if s.outstanding + need <= LEASE.bucket.capacity(p) or #s.leases == 0 then
      return avail, ceil_div((s.outstanding + need) * p.window - s.level, p.limit)
    end
    return avail, s.leases[1].expiry - t
  end,
  take = function(p, s, t, g, use_ms, hold_ms)
    local l = {id = s.next, units = g, expiry = t + hold_ms}
    -- Sorted by expiry, equal ones by id.
    local at = #s.leases + 1
    while at > 1 and s.leases[at - 1].expiry > l.expiry do at = at - 1 end
    table.insert(s.leases, at, l)
    s.next = s.next + 1
    s.outstanding = s.outstanding + g
    return l.id, use_ms
  end,
  -- A spent take: as a lease taken and returned at once, fully used.
  spend = function(p, s, t, g)
    s.level = s.level - g * p.window
  end,
  -- Returns the units given back and whether the state changed.
  give_back = function(p, s, t, stamp, used, unused)
    for i, l in ipairs(s.leases) do
      if l.id == stamp then
        s.level = s.level - used * p.window
        s.outstanding = s.outstanding - l.units
        table.remove(s.leases, i)
        return unused, true
      end
    end
    return 0, false
  end,
  save = function(p, w, s, t, min_ttl)
    local parts = {int(s.level), int(s.last), int(s.next)}
    local latest = t
    for _, l in ipairs(s.leases) do
      parts[#parts + 1] = int(l.id) .. ' ' .. int(l.units) .. ' ' .. int(l.expiry)
      latest = math.max(latest, l.expiry)
    end
    local free = s.level - s.outstanding * p.window
    local full = LEASE.bucket.capacity(p) * p.window
    local live = latest - t + ceil_div(full - free, p.limit)
    redis.call('SET', w.key, table.concat(parts, ' '), 'PX', ttl(live, min_ttl))
  end,
}

-- fixed_window, sub_window, two_bucket: the decision state; a lease is a
-- decision of cost g, valid while the bucket it was counted into is current.
LEASE.window = {
  load = function(p, w, t) return ALG[p.algorithm].load(p, w, t) end,
  avail = function(p, s, t, need)
    local alg = ALG[p.algorithm]
    local remaining = math.max(alg.peek(p, s, t), 0)
    if remaining >= need then return remaining, 0 end
    return remaining, alg.retry_after(p, s, t, need)
  end,
  take = function(p, s, t, g, use_ms, hold_ms)
    ALG[p.algorithm].consume(p, s, t, g)
    if p.algorithm == 'sub_window' then
      local sub_ms = p.window / p.sub_windows
      return s.newest, (s.newest + 1) * sub_ms - t
    end
    return s.index, (s.index + 1) * p.window - t
  end,
  -- A spent take: a decision of cost g.
  spend = function(p, s, t, g)
    ALG[p.algorithm].consume(p, s, t, g)
  end,
  -- Lowers the stored count of the stamped bucket, if it is still stored;
  -- returns the units given back and whether the state changed.
  give_back = function(p, s, t, stamp, used, unused)
    local back = 0
    if p.algorithm == 'fixed_window' then
      if s.index == stamp then
        back = math.min(unused, s.count)
        s.count = s.count - back
      end
    elseif p.algorithm == 'two_bucket' then
      if s.index == stamp then
        back = math.min(unused, s.curr)
        s.curr = s.curr - back
      elseif s.index - 1 == stamp then
        back = math.min(unused, s.prev)
        s.prev = s.prev - back
      end
    else
      local count = s.counts[stamp]
      if count and stamp > s.newest - p.sub_windows then
        back = math.min(unused, count)
        s.given_back = {stamp, back}
      end
    end
    return back, back > 0
  end,
  save = function(p, w, s, t, min_ttl)
    local alg = ALG[p.algorithm]
    local _, reset = alg.peek(p, s, t)
    if p.algorithm == 'sub_window' and s.given_back then
      redis.call('HINCRBY', w.key, int(s.given_back[1]), -s.given_back[2])
      redis.call('PEXPIRE', w.key, ttl(reset, min_ttl))
      return
    end
    alg.save(p, w, s, reset, min_ttl)
  end,
}

-- sliding_log: the decision state (runs "ts count", oldest first, and the
-- units in the second key); a lease's slots are recorded at the latest
-- moment they may be used (t + hold_ms), so that no window holds more than
-- L real admissions; a return removes the unused ones from that record and
-- moves the used ones to the times they were admitted.
LEASE.log = {
  load = function(p, w, t) return ALG.sliding_log.load(p, w, t) end,
  avail = function(p, s, t, need)
    local avail = math.max(p.limit - (s.units - s.expired), 0)
    if avail >= need then return avail, 0 end
    return avail, ALG.sliding_log.retry_after(p, s, t, need)
  end,
  take = function(p, s, t, g, use_ms, hold_ms)
    local at = t + hold_ms
    -- save appends at `at`, or adds to the newest record when it is later
    -- (a clock that stepped back): the stamp is where the slots went.
    local stamp = at
    if s.first_live < s.len then stamp = math.max(at, ALG.sliding_log.run(s, s.len - 1)[1]) end
    ALG.sliding_log.consume(p, s, at, g)
    s.reset = stamp + p.window - t
    return stamp, use_ms
  end,
  -- A spent take: its slots recorded at t (on the newest record when that
  -- is later), as a decision records them.
  spend = function(p, s, t, g)
    LEASE.log.take(p, s, t, g, 0, 0)
  end,
  -- Run i of the list as ALG.sliding_log.run, read 32 at a time backwards
  -- (returns look at the newest runs).
  run_back = function(s, i)
    if not s.runs[i] then
      local from = math.max(s.first_live, i - 31)
      local chunk = redis.call('LRANGE', s.key, from, i)
      for k = 1, #chunk do s.runs[from + k - 1] = {unpack_ints(chunk[k])} end
    end
    return s.runs[i]
  end,
  -- Removes up to `unused` slots recorded at `stamp`, if still there, and
  -- moves the `used` ones to the times they were admitted (`runs`, pairs
  -- {age, count}: at t - age, capped at the stamp; those that left the
  -- window are dropped) when all of them are known and still there;
  -- otherwise they stay at the stamp. Returns the units given back and
  -- whether the state changed.
  give_back = function(p, s, t, stamp, used, unused, runs)
    local i = s.len - 1
    while i >= s.first_live and LEASE.log.run_back(s, i)[1] > stamp do i = i - 1 end
    if i < s.first_live or s.runs[i][1] ~= stamp then return 0, false end
    local count = s.runs[i][2]
    local back = math.min(unused, count)
    local known = 0
    for _, r in ipairs(runs) do known = known + r[2] end
    local removed = back
    local moved = {}
    if used > 0 and known == used and count >= used + unused then
      removed = used + unused
      for _, r in ipairs(runs) do
        local ts = math.min(t - r[1], stamp)
        if ts > t - p.window then moved[#moved + 1] = {ts, r[2]} end
      end
    end
    s.given_back = {at = i, removed = removed, moved = moved}
    return back, removed > 0
  end,
  save = function(p, w, s, t, min_ttl)
    if not s.given_back then
      ALG.sliding_log.save(p, w, s, s.reset, min_ttl)
      return
    end
    local at, removed, moved = s.given_back.at, s.given_back.removed, s.given_back.moved
    -- The list is rewritten from the oldest run the change reaches: the
    -- stamped run, or the earliest moved one's place.
    local oldest = s.runs[at][1]
    for _, r in ipairs(moved) do oldest = math.min(oldest, r[1]) end
    local from = at
    while from > s.first_live and LEASE.log.run_back(s, from - 1)[1] >= oldest do
      from = from - 1
    end
    local tail = {}
    for j = from, s.len - 1 do
      local run = LEASE.log.run_back(s, j)
      local n = run[2]
      if j == at then n = n - removed end
      if n > 0 then tail[#tail + 1] = {run[1], n} end
    end
    local added = 0
    for _, r in ipairs(moved) do
      tail[#tail + 1] = r
      added = added + r[2]
    end
    table.sort(tail, function(x, y) return x[1] < y[1] end)
    local merged = {}
    for _, r in ipairs(tail) do
      local last = merged[#merged]
      if last and last[1] == r[1] then
        last[2] = last[2] + r[2]
      else
        merged[#merged + 1] = {r[1], r[2]}
      end
    end
    local units = s.units - s.expired - removed + added
    if units <= 0 then
      redis.call('DEL', w.key, w.aux)
      return
    end
    if from > s.first_live then
      redis.call('LTRIM', w.key, s.first_live, from - 1)
    else
      redis.call('DEL', w.key)
    end
    for j = 1, #merged, 256 do
      local values = {}
      for k = j, math.min(j + 255, #merged) do
        values[#values + 1] = int(merged[k][1]) .. ' ' .. int(merged[k][2])
      end
      redis.call('RPUSH', w.key, unpack(values))
    end
    local newest = unpack_ints(redis.call('LINDEX', w.key, -1))
    local px = ttl(newest + p.window - t, min_ttl)
    redis.call('SET', w.aux, int(units), 'PX', px)
    redis.call('PEXPIRE', w.key, px)
  end,
}

-- The lease functions of window i's algorithm.
local function lease_kind(p)
  if p.algorithm == 'token_bucket' or p.algorithm == 'leaky_bucket' then return LEASE.bucket end
  if p.algorithm == 'sliding_log' then return LEASE.log end
  return LEASE.window
end
