-- tollgate: gives an in-flight lease back. KEYS: the lease set. ARGV: lease id.
return redis.call('ZREM', KEYS[1], ARGV[1])
