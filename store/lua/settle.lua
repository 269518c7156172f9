-- tollgate: settles a reservation to its actual cost, on every window of a
-- limit in one step (docs/algorithms.md, "Settling a reservation";
-- algorithms/settle.cc is the C++ text it mirrors). Runs after prelude.lua
-- and every algorithm's file: KEYS and ARGV as decide.lua's, then instead
-- of costs: the reservation's age in ms (its time is t - age, so that a
-- client clock's reservation settles under server time), the units
-- reserved and the actual units.
-- Returns {allowed, remaining, retry_after_ms, delay_ms, reset_ms, window,
-- window_reset_ms} as decide.lua does for one decision: the state after
-- the settle as a request of one unit would see it (delay_ms is 0).
local a = 4 + 6 * count
local reserved_at = t - tonumber(ARGV[a])
local reserved = tonumber(ARGV[a + 1])
local actual = tonumber(ARGV[a + 2])

-- A charge (or a refund) counts at most twice the capacity.
local function capacity(p)
  if p.algorithm == 'token_bucket' then return p.burst end
  if p.algorithm == 'leaky_bucket' then return p.burst + 1 end
  return p.limit
end

-- A count charged `charge` more, at most `most` (never below what it was).
local function charge_to(c, charge, most)
  return c + math.min(charge, math.max(0, most - c))
end

local SETTLE = {}
SETTLE.token_bucket = function(p, s, refund, charge)
  local full = p.burst * p.window
  local level = ALG.token_bucket.level(p, s, t)
  if refund > 0 then level = math.min(full, level + refund * p.window) end
  if charge > 0 then level = math.max(-full, level - charge * p.window) end
  s.level = level
  s.last = math.max(s.last, t)
end
SETTLE.leaky_bucket = function(p, s, refund, charge)
  local level = ALG.leaky_bucket.level(p, s, t)
  if refund > 0 then level = math.max(0, level - refund * p.window) end
  if charge > 0 then level = math.min(2 * (p.burst + 1) * p.window, level + charge * p.window) end
  s.level = level
  s.last = math.max(s.last, t)
end
SETTLE.fixed_window = function(p, s, refund, charge)
  local index = floor_div(t, p.window)
  local counted = s.index == index and floor_div(reserved_at, p.window) == index
  if refund > 0 and counted then s.count = s.count - math.min(s.count, refund) end
  if charge > 0 then
    if s.index ~= index then
      s.index = index
      s.count = 0
    end
    s.count = charge_to(s.count, charge, 2 * p.limit)
  end
end
SETTLE.sub_window = function(p, s, refund, charge)
  local n = p.sub_windows
  local sub_ms = p.window / n
  local index = floor_div(t, sub_ms)
  local reserved_in = floor_div(reserved_at, sub_ms)
  if refund > 0 then
    if reserved_in > math.max(index, s.newest) - n and reserved_in <= s.newest then
      local c = s.counts[reserved_in] or 0
      s.counts[reserved_in] = c - math.min(c, refund)
      s.touched = reserved_in
    end
    return
  end
  if charge == 0 then return end
  if index > s.newest then s.newest = index end
  local total = 0
  for j = s.newest - n + 1, s.newest do total = total + (s.counts[j] or 0) end
  local target = s.newest
  if reserved_in > s.newest - n and reserved_in <= s.newest then target = reserved_in end
  -- Saturating as the local store's 16- or 32-bit counts.
  local most = 4294967295
  if p.limit < 65535 then most = 65535 end
  local add = math.min(charge, math.max(0, 2 * p.limit - total))
  s.counts[target] = math.min((s.counts[target] or 0) + add, most)
  s.touched = target
end
SETTLE.two_bucket = function(p, s, refund, charge)
  local index = floor_div(t, p.window)
  if index > s.index then
    local curr = 0
    if s.index == index - 1 then curr = s.curr end
    s.index, s.curr, s.prev = index, 0, curr
  end
  local reserved_in = floor_div(reserved_at, p.window)
  local field = nil
  if reserved_in == s.index then
    field = 'curr'
  elseif reserved_in == s.index - 1 then
    field = 'prev'
  end
  if refund > 0 and field then s[field] = s[field] - math.min(s[field], refund) end
  if charge > 0 then
    field = field or 'curr'
    s[field] = charge_to(s[field], charge, 2 * p.limit)
  end
end

-- A single token_bucket window keeps token_bucket_fused.lua's state.
local fused = count == 1 and params[1].algorithm == 'token_bucket'
local allowed_retry, remaining, shown, shown_reset, reset = 0, nil, 0, 0, 0
for i = 1, count do
  local p = params[i]
  local alg = ALG[p.algorithm]
  local w = {p = p, alg = alg, key = KEYS[2 * i - 1], aux = KEYS[2 * i]}
  local s
  if fused then
    s = alg.load_packed(p, w, t)
  else
    s = alg.load(p, w, t)
  end
  local refund, charge = 0, 0
  if actual <= reserved then
    refund = math.min(reserved - actual, 2 * capacity(p))
  else
    charge = math.min(actual - reserved, 2 * capacity(p))
  end
  SETTLE[p.algorithm](p, s, refund, charge)
  local r, window_reset = alg.peek(p, s, t)
  if remaining == nil or r < remaining then
    remaining, shown, shown_reset = r, i - 1, window_reset
  end
  reset = math.max(reset, window_reset)
  allowed_retry = math.max(allowed_retry, alg.retry_after(p, s, t, 1))
  if fused then
    alg.save_packed(w, s, window_reset, min_ttl)
  elseif p.algorithm == 'sub_window' then
    alg.drop_stale(p, w, s)
    if s.touched then redis.call('HSET', w.key, int(s.touched), int(s.counts[s.touched])) end
    redis.call('PEXPIRE', w.key, ttl(window_reset, min_ttl))
  else
    alg.save(p, w, s, window_reset, min_ttl)
  end
end
local allowed = 0
if allowed_retry == 0 then allowed = 1 end
return {allowed, remaining, allowed_retry, 0, reset, shown, shown_reset}
