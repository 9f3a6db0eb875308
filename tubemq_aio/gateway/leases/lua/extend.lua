-- extend(wake, p, lease_id, lease_ms)
local p, lid, lease_ms = ARGV[2], ARGV[3], tonumber(ARGV[4])
if not booted() then return {'lost', NOW} end
if hget(p, 'lid') ~= lid then return {'stale', NOW} end
redis.call('ZREM', K_READY, p)
redis.call('ZADD', K_LEASED, fmt(NOW + lease_ms), p)
hset(p, 'lexp', fmt(NOW + lease_ms))
redis.call('HSET', K_ACQ, lid, p)
return {'ok', NOW, NOW + lease_ms}
