-- tollgate: shared helpers of every decision script (docs/algorithms.md).
-- All values are integers kept below 2^53, so doubles hold them exactly and
-- math.floor after a division is an exact integer division.
local ALG = {}

-- ceil(a / b) for a >= 0, b > 0, as docs/algorithms.md writes it.
local function ceil_div(a, b) return math.floor((a + b - 1) / b) end

-- floor(a / b) for b > 0.
local function floor_div(a, b) return math.floor(a / b) end

-- An integer as Redis stores it (tostring would round above 14 digits).
local function int(x) return string.format('%d', x) end

-- Elapsed time since last_ms, clamped: no bucket needs more than
-- ceil(2*(B+1)*W/L) + 1 ms to refill or drain, a settle's debt included.
local function clamped_elapsed(p, last_ms, t)
  local cap = ceil_div(2 * (p.burst + 1) * p.window, p.limit) + 1
  local e = t - last_ms
  if e < 0 then return 0 end
  if e > cap then return cap end
  return e
end

-- "a b" or "a b c" -> a, b[, c] as numbers; nil when the key is absent.
-- (One anchored match and no table: nothing allocated per call.)
local function unpack_ints(value)
  if not value then return nil end
  local a, b, c = string.match(value, '^(%-?%d+) (%-?%d+) ?(%-?%d*)$')
  return tonumber(a), tonumber(b), tonumber(c)
end

-- The state of a window lives until it is fresh again: reset_ms, at least
-- min_ttl (replay runs on a virtual clock that real time may overtake).
local function ttl(reset_ms, min_ttl)
  if reset_ms < min_ttl then reset_ms = min_ttl end
  if reset_ms < 1 then reset_ms = 1 end
  return int(reset_ms)
end

-- The request, as every decision script reads it. ARGV: now_ms ("" = the
-- server's TIME), min_ttl_ms, window count, then the windows and the costs
-- (see decide.lua).
local t = now_ms(ARGV[1])
local min_ttl = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
-- The windows' parameters, params[1..count]: after the first three
-- arguments, six per window (see decide.lua).
local params = {}
for i = 1, count do
  local a = 3 + (i - 1) * 6
  params[i] = {
    algorithm = ARGV[a + 1],
    limit = tonumber(ARGV[a + 2]),
    window = tonumber(ARGV[a + 3]),
    burst = tonumber(ARGV[a + 4]),
    sub_windows = tonumber(ARGV[a + 5]),
    nodelay = tonumber(ARGV[a + 6]),
  }
end
