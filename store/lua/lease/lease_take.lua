-- tollgate: takes a lease of up to `want` units from every window of a
-- key at once (docs/leases.md). After prelude.lua, every algorithm and
-- lease.lua. ARGV after decide.lua's windows: want, use_ms (T), hold_ms (H).
-- Returns {g, valid_ms, retry_after_ms, stamp per window}: g >= 1 with
-- retry_after_ms 0, or g = 0 with retry_after_ms >= 1 and nothing changed.
local a = 4 + 6 * count
local want, use_ms, hold_ms = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
local windows = {}
local g = want
local retry = 0
for i = 1, count do
  local p = params[i]
  local w = {p = p, kind = lease_kind(p), key = KEYS[2 * i - 1], aux = KEYS[2 * i]}
  w.state = w.kind.load(p, w, t)
  local avail, wait = w.kind.avail(p, w.state, t)
  if avail < g then g = avail end
  if avail == 0 then retry = math.max(retry, wait) end
  windows[i] = w
end
if g < 1 then return {0, 0, math.max(retry, 1)} end
local reply = {g, use_ms, 0}
for i = 1, count do
  local w = windows[i]
  local stamp, valid = w.kind.take(w.p, w.state, t, g, use_ms, hold_ms)
  reply[2] = math.min(reply[2], valid)
  reply[3 + i] = stamp
  w.kind.save(w.p, w, w.state, t, min_ttl)
end
return reply
