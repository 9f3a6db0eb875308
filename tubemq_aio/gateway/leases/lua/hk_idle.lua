-- hk_idle(KEYS: ready zset of a scope; ARGV: older_than_ms): partitions nobody leased for that
-- long (their ready score is when they last became eligible), oldest first, at most 256.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local upto = string.format('%d', now - tonumber(ARGV[1]))
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', upto, 'LIMIT', 0, 256)
