-- tollgate: what a key's state allows now, window by window, without
-- changing it (the admin API's GET /api/v1/keys; algorithms::Inspect is the
-- local store's). Runs after prelude.lua and every algorithm's file: KEYS
-- and ARGV as decide.lua's, without costs.
-- Returns per window {remaining, reset_ms, retry_after_ms, level, previous}
-- one after the other, retry_after_ms for a request of one unit (0:
-- allowed now), level and previous the algorithm's own state as
-- algorithms::WindowView has it (a bucket's level in units; the units a
-- window counts; two_bucket's current and previous counts).
local reply = {}
for i = 1, count do
  local p = params[i]
  local alg = ALG[p.algorithm]
  local w = {p = p, alg = alg, key = KEYS[2 * i - 1], aux = KEYS[2 * i]}
  local state
  if count == 1 and p.algorithm == 'token_bucket' then
    state = alg.load_packed(p, w, t)
  else
    state = alg.load(p, w, t)
  end
  local remaining, reset = alg.peek(p, state, t)
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
  reply[#reply + 1] = alg.retry_after(p, state, t, 1)
  local level, previous = p.limit - remaining, 0
  if p.algorithm == 'token_bucket' or p.algorithm == 'leaky_bucket' then
    level = alg.level(p, state, t)
  elseif p.algorithm == 'fixed_window' then
    level = alg.count(state, floor_div(t, p.window))
  elseif p.algorithm == 'sub_window' then
    level = alg.total(p, state, floor_div(t, p.window / p.sub_windows))
  elseif p.algorithm == 'two_bucket' then
    local c = alg.carry_forward(p, state, t)
    level, previous = c.curr, c.prev
  end
  reply[#reply + 1] = level
  reply[#reply + 1] = previous
end
return reply
