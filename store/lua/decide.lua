-- Decisions against every window of a limit, each all or nothing.
-- KEYS: per window, its state key and its second key (used by sliding_log).
-- ARGV: now_ms, min_ttl_ms, window count (read by prelude.lua into t,
--       min_ttl, count), then per window: algorithm, limit, window_ms,
--       burst, sub_windows, nodelay (1/0) (read by prelude.lua into
--       params); then the cost of each decision.
--       The decisions run one after the other at the same now_ms, each
--       loading, deciding and saving as a call of its own would (the
--       gateway coalesces concurrent decisions of one key into one call).
-- Returns, per decision, {allowed, remaining, retry_after_ms, delay_ms,
-- reset_ms, window, window_reset_ms} one after the other in one array;
-- window is 0-based.

local reply = {}
for c = 4 + 6 * count, #ARGV do
  local cost = tonumber(ARGV[c])
  local windows = {}
  for i = 1, count do
    local p = params[i]
    local w = {p = p, alg = ALG[p.algorithm], key = KEYS[2 * i - 1], aux = KEYS[2 * i]}
    w.state = w.alg.load(p, w, t)
    windows[i] = w
  end

  local retry_after = 0
  for i = 1, count do
    local w = windows[i]
    retry_after = math.max(retry_after, w.alg.retry_after(w.p, w.state, t, cost))
  end
  local allowed = retry_after == 0
  local delay = 0
  if allowed then
    for i = 1, count do
      local w = windows[i]
      delay = math.max(delay, w.alg.consume(w.p, w.state, t, cost))
    end
  end

  local remaining = nil
  local shown = 0
  local shown_reset = 0
  local reset = 0
  for i = 1, count do
    local w = windows[i]
    local r, window_reset = w.alg.peek(w.p, w.state, t)
    if remaining == nil or r < remaining then
      remaining = r
      shown = i - 1
      shown_reset = window_reset
    end
    reset = math.max(reset, window_reset)
    if allowed then w.alg.save(w.p, w, w.state, window_reset, min_ttl) end
  end

  local a = 0
  if allowed then a = 1 end
  local n = #reply
  reply[n + 1] = a
  reply[n + 2] = remaining
  reply[n + 3] = retry_after
  reply[n + 4] = delay
  reply[n + 5] = reset
  reply[n + 6] = shown
  reply[n + 7] = shown_reset
end
return reply
