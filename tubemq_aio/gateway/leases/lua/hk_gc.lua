-- hk_gc(KEYS: clients, seen, st, ready, leased, parts, acq, done of one broadcast scope, owners;
--       ARGV: scope, idle_ms): delete the scope's state if it was not seen for idle_ms and
-- holds no live lease. Only broadcast scopes ("b:..."): a clustering group's offsets are never
-- touched. A scope without a last-seen time (state older than this script) is adopted: its
-- idle time starts now.
local scope, idle = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if string.sub(scope, 1, 2) ~= 'b:' or idle <= 0 then return {'refused', now} end
local seen = redis.call('ZSCORE', KEYS[2], scope)
if not seen then
  if redis.call('SISMEMBER', KEYS[1], scope) == 1 then
    redis.call('ZADD', KEYS[2], string.format('%d', now), scope)
    return {'adopted', now}
  end
  return {'absent', now}
end
if tonumber(seen) > now - idle then return {'active', now} end
if redis.call('ZRANGEBYSCORE', KEYS[5], '(' .. string.format('%d', now), '+inf', 'LIMIT', 0, 1)[1] then
  return {'leased', now}
end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
redis.call('SREM', KEYS[1], scope)
redis.call('ZREM', KEYS[2], scope)
redis.call('HDEL', KEYS[9], scope)
return {'deleted', now}
