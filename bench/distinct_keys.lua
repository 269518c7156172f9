-- wrk script: every request carries X-Key, taking 100000 values in turn, so
-- requests in flight together never share a key (a rule with
-- key = "header:X-Key" then decides each on its own state).
local n = 0
request = function()
  n = (n + 1) % 100000
  return wrk.format(nil, nil, { ["X-Key"] = tostring(n) })
end
