-- tollgate: gives a lease's unused units back to every window of its key
-- (docs/leases.md). After prelude.lua, every algorithm and lease.lua. ARGV
-- after decide.lua's windows: used, unused, the lease's stamp per window,
-- then when the used units were admitted, pairs (ms before t, count), for
-- a sliding_log (none if unknown). Returns the units given back (the
-- fewest over the windows).
local a = 4 + 6 * count
local used, unused = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
local runs = {}
for j = a + 2 + count, #ARGV - 1, 2 do
  runs[#runs + 1] = {tonumber(ARGV[j]), tonumber(ARGV[j + 1])}
end
local back = unused
for i = 1, count do
  local p = params[i]
  local w = {p = p, kind = lease_kind(p), key = KEYS[2 * i - 1], aux = KEYS[2 * i]}
  local s = w.kind.load(p, w, t)
  local given, changed = w.kind.give_back(p, s, t, tonumber(ARGV[a + 1 + i]), used, unused, runs)
  back = math.min(back, given)
  if changed then w.kind.save(p, w, s, t, min_ttl) end
end
return back
