-- tollgate: what an upstream's response taught; algorithms/learned.cc
-- LearnFrom line for line. It only ever sets the bucket's limit, the expiry
-- of its remaining (and remaining = 0 on a 429) and the global block.
-- KEYS: the upstream's global block, the bucket's remaining, its limit.
-- ARGV: limit, reset_at_ms, retry_at_ms (Unix ms when the gateway read the
--       response plus Reset-After / Retry-After; each -1: not said),
--       limited (1/0), global (1/0).
-- The one addition to LearnFrom: this script runs a little after the
-- response was read (pipelining); a reset that is already over by then
-- belongs to a window that has ended, and the bucket's present counter
-- (perhaps started in the next window) must not take its expiry.
local limit = tonumber(ARGV[1])
local reset_at = tonumber(ARGV[2])
local retry_at = tonumber(ARGV[3])
local limited = ARGV[4] == '1'
local global = ARGV[5] == '1'
if limit > 0 then redis.call('SET', KEYS[3], string.format('%d', limit)) end
local t = now_ms('')
local reset = -1
if reset_at >= 0 then reset = reset_at - t end
if retry_at >= 0 then reset = retry_at - t end
if (reset_at >= 0 or retry_at >= 0) and reset < 0 then return 0 end
if limited and global then
  local ttl = 1000
  if reset > 0 then ttl = reset end
  if ttl > redis.call('PTTL', KEYS[1]) then
    redis.call('SET', KEYS[1], '1', 'PX', string.format('%d', ttl))
  end
  return 0
end
if limited then redis.call('SET', KEYS[2], '0', 'KEEPTTL') end
if reset >= 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], string.format('%d', math.max(reset, 1)))
end
return 0
