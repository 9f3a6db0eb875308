-- read_ahead(wake, p, lease_id, token, allow_ms): mark a read-ahead of p in flight until
-- NOW + allow_ms, sent by the replica after it answers with the batch booked under lease_id
-- (in the same round trip as that booking). A retry with the same token answers the same.
-- Answers ok (until), stale (the lease is not live or has no batch booked) or busy (another
-- read-ahead is marked). The token is never '' (the store refuses it).
local p, lid, token, allow_ms = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
if not booted() then return {'lost', NOW} end
local held, until_ms = read_mark(p)
if held == token then return {'ok', NOW, until_ms} end
if not live(p, lid) or hget(p, 'ls') == false then return {'stale', NOW} end
if held then return {'busy', NOW} end
redis.call('HSET', K_CUR, p .. '|ra', token .. '|' .. fmt(NOW + allow_ms))
return {'ok', NOW, NOW + allow_ms}
