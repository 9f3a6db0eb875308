-- reset(wake, target, n_pairs, p1, off1, ..., extra partitions...): writes the boot marker
local target, npairs = ARGV[2], tonumber(ARGV[3])
redis.call('HSETNX', K_CFG, 'boot', fmt(NOW))
local todo = {}
if target ~= '' then
  for i = 4 + 2 * npairs, #ARGV do redis.call('SADD', K_PARTS, ARGV[i]) end
  local members = redis.call('SMEMBERS', K_PARTS)
  table.sort(members)
  for _, p in ipairs(members) do todo[#todo + 1] = {p, target} end
else
  for i = 0, npairs - 1 do
    local p = ARGV[4 + 2 * i]
    redis.call('SADD', K_PARTS, p)
    todo[#todo + 1] = {p, tonumber(ARGV[5 + 2 * i])}
  end
end
local out = {'ok', NOW}
for _, item in ipairs(todo) do
  local p, to = item[1], item[2]
  out[#out + 1] = p
  out[#out + 1] = hgetn(p, 'cmt') or -1
  if type(to) == 'number' then
    out[#out + 1] = fmt(to)
    hset(p, 'cmt', fmt(to))
    redis.call('HDEL', K_ST, fld(p, 'start'))
  else
    out[#out + 1] = to
    redis.call('HDEL', K_ST, fld(p, 'cmt'))
    hset(p, 'start', to)
  end
  local lid = hget(p, 'lid')
  -- A holder between its acquire and its booking may still reach the broker until its lease's
  -- expiry, and a read-ahead in flight until its deadline: p is not handed out before the later
  -- of the two (a voided mark: token '', its end books nothing).
  local _, until_ms = read_mark(p)
  if lid and not hget(p, 'ls') then
    local lexp = tonumber(redis.call('ZSCORE', K_LEASED, p) or '0')
    if lexp > NOW and (until_ms == nil or lexp > until_ms) then until_ms = lexp end
  end
  if until_ms then redis.call('HSET', K_CUR, p .. '|ra', '|' .. fmt(until_ms)) end
  if lid then
    redis.call('HDEL', K_ACQ, lid)
    drop_rate_hold(lid)
  end
  redis.call('HDEL', K_ST, fld(p, 'lid'), fld(p, 'lexp'), fld(p, 'lat'), fld(p, 'lh'),
    fld(p, 'ls'), fld(p, 'ln'), fld(p, 'last'), fld(p, 'rc'), fld(p, 'zc'))
  redis.call('ZREM', K_LEASED, p)
  redis.call('HDEL', K_CUR, p .. '|kf')
  if hget(p, 'gone') ~= '1' then redis.call('ZADD', K_READY, fmt(NOW), p) end
end
redis.call('PUBLISH', 'tgw:wake', WAKE)
return out
