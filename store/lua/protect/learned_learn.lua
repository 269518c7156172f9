-- tollgate: what an upstream's response taught; algorithms/learned.cc
-- LearnFrom line for line. It only ever sets the bucket's limit, the expiry
-- of its remaining (and remaining = 0 on a 429) and the global block.
-- KEYS: the upstream's global block, the bucket's remaining, its limit.
-- ARGV: limit, reset_after_ms, retry_after_ms (each -1: not said),
--       limited (1/0), global (1/0).
local limit = tonumber(ARGV[1])
local reset_after = tonumber(ARGV[2])
local retry_after = tonumber(ARGV[3])
local limited = ARGV[4] == '1'
local global = ARGV[5] == '1'
if limit > 0 then redis.call('SET', KEYS[3], string.format('%d', limit)) end
local reset = reset_after
if retry_after >= 0 then reset = retry_after end
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
