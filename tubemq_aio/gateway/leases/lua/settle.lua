-- settle(wake, p, lease_id, action ack|nack|release, delay_ms)
-- A settled lease answers {'already', cmt, how it ended} while remembered (a lease's length).
local p, lid, action, delay = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
if not booted() then return {'lost', NOW} end
if hget(p, 'lid') ~= lid then
  local o = settled_as(lid)
  if o == nil and hget(p, 'last') == lid then o = 'released' end
  if o then return {'already', NOW, hgetn(p, 'cmt') or -1, o} end
  return {'stale', NOW}
end
local life = math.max(0, (hgetn(p, 'lexp') or NOW) - (hgetn(p, 'lat') or NOW))
local ls = hgetn(p, 'ls')
if ls == nil then
  action = 'release'
elseif hgetn(p, 'cmt') ~= ls then
  remember(lid, 'released', life)
  release(p, 0)
  return {'conflict', NOW}
end
local wait = 0
local result = 'released'
if action == 'ack' then
  hset(p, 'cmt', hget(p, 'ln'))
  redis.call('HDEL', K_ST, fld(p, 'rc'))
  hset(p, 'la', fmt(NOW))
  result = 'acked'
elseif action == 'nack' then
  redis.call('HINCRBY', K_ST, fld(p, 'rc'), 1)
  wait = delay
  result = 'nacked'
else
  wait = delay
end
remember(lid, result, life)
release(p, wait)
return {result, NOW, hgetn(p, 'cmt') or -1}
