-- tollgate: lease_take.lua for a single bucket window (token_bucket, or
-- leaky_bucket with nodelay), in straight-line code: LEASE.bucket's load,
-- avail, take and save of lease.lua, without the prelude, the algorithms
-- and lease.lua (Lua 5.1 allocates a closure for every function a script
-- defines, on every call; see token_bucket_fused.lua). Same ARGV, state
-- and replies as lease_take.lua with one window, but one key per take (the
-- window's state: no second key); tested against the
-- C++ text with it (LeaseConformance). After clock.lua only. A key with
-- at most one live lease saves its state with one string.format. A
-- negative `want`, -n, is a spent take of n units (LEASE.bucket.spend).
local t = now_ms(ARGV[1])
local min_ttl = tonumber(ARGV[2])
local limit, window, burst = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
-- LEASE.bucket.capacity
local capacity = burst
if ARGV[4] == 'leaky_bucket' then capacity = burst + 1 end
local full = capacity * window
-- LEASE.bucket.elapsed's clamp
local clamp = math.floor(((capacity + 1) * window + limit - 1) / limit) + 1
local use_ms, hold_ms = tonumber(ARGV[10]), tonumber(ARGV[11])
local replies = {}
for k = 0, #ARGV - 12 do
  local want = tonumber(ARGV[12 + k])
  local spent = want < 0
  if spent then want = -want end
  local need = 1
  if spent then need = want end
  local key = KEYS[k + 1]
  -- load: the state brought to t, expired leases counted as spent.
  local level, last, next_id = full, t, 1
  local leases = {}  -- id, units, expiry, flat, by expiry
  local value = redis.call('GET', key)
  if value then
    local n = {}
    for x in string.gmatch(value, '%-?%d+') do n[#n + 1] = tonumber(x) end
    level, last, next_id = n[1], n[2], n[3]
    for i = 4, #n, 3 do
      local expiry = n[i + 2]
      if expiry <= t then
        -- refill to the expiry, then the lease's units count as spent
        local e = expiry - last
        if e < 0 then e = 0 elseif e > clamp then e = clamp end
        level = math.min(full, level + e * limit)
        if expiry > last then last = expiry end
        level = level - n[i + 1] * window
      else
        leases[#leases + 1] = n[i]
        leases[#leases + 1] = n[i + 1]
        leases[#leases + 1] = expiry
      end
    end
  end
  local outstanding = 0
  for i = 2, #leases, 3 do outstanding = outstanding + leases[i] end
  local e = t - last
  if e < 0 then e = 0 elseif e > clamp then e = clamp end
  level = math.min(full, level + e * limit)
  if t > last then last = t end
  -- avail
  local avail = math.floor((level - outstanding * window) / window)
  if avail < need then
    local retry
    if outstanding + need <= capacity or #leases == 0 then
      retry = math.floor(((outstanding + need) * window - level + limit - 1) / limit)
    else
      retry = leases[3] - t
    end
    replies[k + 1] = string.format('0 0 %d', math.max(retry, 1))
  else
    if spent then
      -- as a lease taken and returned at once, fully used
      level = level - want * window
      replies[k + 1] = string.format('%d 0 0', want)
    else
      local g = math.min(want, avail)
      -- take: a new lease, sorted by expiry (equal ones by id)
      local expiry = t + hold_ms
      replies[k + 1] = string.format('%d %d 0 %d', g, use_ms, next_id)
      outstanding = outstanding + g
      local at = #leases + 1
      while at > 1 and leases[at - 1] > expiry do at = at - 3 end
      table.insert(leases, at, expiry)
      table.insert(leases, at, g)
      table.insert(leases, at, next_id)
      next_id = next_id + 1
    end
    -- save: one string.format for no lease or one (a cold or steady key's)
    local saved
    if #leases == 0 then
      saved = string.format('%d %d %d', level, last, next_id)
    elseif #leases == 3 then
      saved = string.format('%d %d %d %d %d %d', level, last, next_id, leases[1], leases[2],
                            leases[3])
    else
      local parts = {string.format('%d %d %d', level, last, next_id)}
      for i = 1, #leases, 3 do
        parts[#parts + 1] = string.format('%d %d %d', leases[i], leases[i + 1], leases[i + 2])
      end
      saved = table.concat(parts, ' ')
    end
    -- sorted by expiry: the last lease's is the latest
    local latest = t
    if #leases > 0 and leases[#leases] > t then latest = leases[#leases] end
    local free = level - outstanding * window
    local live = latest - t + math.floor((full - free + limit - 1) / limit)
    if live < min_ttl then live = min_ttl end
    if live < 1 then live = 1 end
    redis.call('SET', key, saved, 'PX', string.format('%d', live))
  end
end
return table.concat(replies, ',')
