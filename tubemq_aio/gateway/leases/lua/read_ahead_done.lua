-- read_ahead_done(wake, p, token, kept, cursor): end the read-ahead token of p; kept ('' none)
-- becomes the partition's fence (field "<p>|kf" of cur), cursor (-1 unknown) its broker cursor,
-- and the scope is woken. Answers stale, changing nothing, when the mark is not this read's.
local p, token, kept, cursor = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
if not booted() then return {'lost', NOW} end
local held = read_mark(p)
if token == '' or held ~= token then return {'stale', NOW} end
redis.call('HDEL', K_CUR, p .. '|ra')
if kept ~= '' then
  redis.call('HSET', K_CUR, p .. '|kf', kept)
else
  redis.call('HDEL', K_CUR, p .. '|kf')
end
if cursor >= 0 then
  redis.call('HSET', K_CUR, p, fmt(cursor))
else
  redis.call('HDEL', K_CUR, p)
end
if WAKE ~= '' then redis.call('PUBLISH', 'tgw:wake', WAKE) end
return {'ok', NOW}
