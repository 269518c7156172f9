-- tollgate: a request joins the requests of one rule key waiting for a
-- later window (action = "delay"). KEYS: the key's waiting counter.
-- ARGV: ttl_ms (the longest a request waits: a gateway that dies without
-- leaving is forgotten after it). Returns how many were waiting before.
local n = redis.call('INCR', KEYS[1])
if n < 1 then
  n = 1
  redis.call('SET', KEYS[1], '1')
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n - 1
