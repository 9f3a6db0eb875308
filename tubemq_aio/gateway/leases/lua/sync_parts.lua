-- sync_parts(wake, p...): the subscribable partitions now; vanished ones are marked gone
if not booted() then return {'lost', NOW} end
local want, added, gone = {}, 0, 0
for i = 2, #ARGV do
  local p = ARGV[i]
  want[p] = true
  if redis.call('SISMEMBER', K_PARTS, p) == 0 then
    redis.call('SADD', K_PARTS, p)
    redis.call('ZADD', K_READY, fmt(NOW), p)
    added = added + 1
  elseif hget(p, 'gone') == '1' then
    redis.call('HDEL', K_ST, fld(p, 'gone'))
    if not redis.call('ZSCORE', K_LEASED, p) and not redis.call('ZSCORE', K_READY, p) then
      redis.call('ZADD', K_READY, fmt(NOW), p)
    end
    added = added + 1
  end
end
local members = redis.call('SMEMBERS', K_PARTS)
table.sort(members)
for _, p in ipairs(members) do
  if not want[p] and hget(p, 'gone') ~= '1' then
    hset(p, 'gone', '1')
    redis.call('ZREM', K_READY, p)
    gone = gone + 1
  end
end
if added > 0 then redis.call('PUBLISH', 'tgw:wake', WAKE) end
return {'ok', NOW, added, gone}
