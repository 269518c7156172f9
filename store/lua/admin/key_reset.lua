-- tollgate: forgets a key's state (the admin API's DELETE /api/v1/keys):
-- KEYS and ARGV as decide.lua's (ARGV unused). Returns the number of Redis
-- keys deleted.
if #KEYS == 0 then return 0 end
return redis.call('DEL', unpack(KEYS))
