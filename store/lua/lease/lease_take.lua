-- tollgate: takes leases, each of up to `want` units from every window of a
-- key at once (docs/leases.md), for one or more keys of one limit. After
-- prelude.lua, every algorithm and lease.lua.
-- KEYS: decide.lua's (two per window) of each key in turn.
-- ARGV after decide.lua's windows: use_ms (T), hold_ms (H), then one `want`
-- per key, in KEYS order; a negative one, -n, is a spent take of n units
-- (all or none, admitted at once: no lease is kept). The keys are taken from one after the other,
-- each loaded, taken from and saved as a call of its own would be (the
-- gateway batches the takes of distinct keys of one limit into one call).
-- Returns one string: per key, in KEYS order and separated by ',', the
-- integers "g valid_ms retry_after_ms stamp..." (a stamp per window): g >= 1
-- with retry_after_ms 0, or "0 0 retry_after_ms" (>= 1) with nothing
-- changed; a spent take's "n 0 0". (One string, not nested arrays: Redis
-- and hiredis make one reply object of it.)
local a = 4 + 6 * count
local use_ms, hold_ms = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
local replies = {}
for k = 0, #ARGV - a - 2 do
  local want = tonumber(ARGV[a + 2 + k])
  local spent = want < 0
  if spent then want = -want end
  -- a spent take is all or none; a lease needs one unit
  local need = 1
  if spent then need = want end
  local base = 2 * count * k
  local windows = {}
  local g = want
  local retry = 0
  for i = 1, count do
    local p = params[i]
    local w = {p = p, kind = lease_kind(p), key = KEYS[base + 2 * i - 1], aux = KEYS[base + 2 * i]}
    w.state = w.kind.load(p, w, t)
    local avail, wait = w.kind.avail(p, w.state, t, need)
    if avail < g then g = avail end
    if avail < need then retry = math.max(retry, wait) end
    windows[i] = w
  end
  if g < need then
    replies[k + 1] = '0 0 ' .. int(math.max(retry, 1))
  elseif spent then
    for i = 1, count do
      local w = windows[i]
      w.kind.spend(w.p, w.state, t, g)
      w.kind.save(w.p, w, w.state, t, min_ttl)
    end
    replies[k + 1] = int(g) .. ' 0 0'
  else
    local valid_ms = use_ms
    local stamps = {}
    for i = 1, count do
      local w = windows[i]
      local stamp, valid = w.kind.take(w.p, w.state, t, g, use_ms, hold_ms)
      valid_ms = math.min(valid_ms, valid)
      stamps[i] = int(stamp)
      w.kind.save(w.p, w, w.state, t, min_ttl)
    end
    replies[k + 1] = int(g) .. ' ' .. int(valid_ms) .. ' 0 ' .. table.concat(stamps, ' ')
  end
end
return table.concat(replies, ',')
