-- record(wake, p, lease_id, base, next, max, n_msgs, wait_if_empty_ms, cursor, kept
--        [, fence_token])
-- kept: the kept-batch fence "<token>|<start>" the read leaves ('' none); it replaces
-- the partition's fence (field "<p>|kf" of cur). An answer other than ok/released on a first
-- booking deletes the cursor and any fence (a read that is not booked moved the broker).
-- KEYS[10] (broadcast): the cursor mutex the read ran under; the batch is booked only if
-- fence_token still holds it (else another reader may have moved the broker cursor meanwhile).
local p, lid = ARGV[2], ARGV[3]
local base, nxt, top = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local n, wait, cursor = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local kept = ARGV[10]
if not booted() then return {'lost', NOW} end
if not live(p, lid) then
  redis.call('HDEL', K_CUR, p .. '|kf')
  if hget(p, 'last') == lid and hget(p, 'lid') ~= lid then
    return {'released', NOW, hgetn(p, 'cmt') or -1}
  end
  redis.call('HDEL', K_CUR, p)
  return {'stale', NOW}
end
local ls = hgetn(p, 'ls')
if ls ~= nil then
  if ls == base and hgetn(p, 'ln') == nxt then return {'ok', NOW} end
  return {'moved', NOW}
end
if KEYS[10] and redis.call('GET', KEYS[10]) ~= ARGV[11] then
  redis.call('HDEL', K_CUR, p, p .. '|kf')
  return {'fenced', NOW}
end
if hgetn(p, 'cmt') ~= base or nxt < base then
  redis.call('HDEL', K_CUR, p, p .. '|kf')
  return {'moved', NOW}
end
if top > (hgetn(p, 'mx') or -1) then hset(p, 'mx', fmt(top)) end
if cursor >= 0 then
  redis.call('HSET', K_CUR, p, fmt(cursor))
else
  redis.call('HDEL', K_CUR, p)
end
if kept ~= '' then
  redis.call('HSET', K_CUR, p .. '|kf', kept)
else
  redis.call('HDEL', K_CUR, p .. '|kf')
end
local rate, burst = rate_params()
if n > 0 and rate > 0 then
  local tat = stored_tat() or NOW_US
  if tat < NOW_US then tat = NOW_US end
  redis.call('SET', K_RL, fmt(math.floor(tat + (1e6 / rate) * n)))
end
drop_rate_hold(lid)
if n == 0 then
  if nxt ~= base then redis.call('HDEL', K_ST, fld(p, 'rc')) end
  hset(p, 'cmt', fmt(nxt))
  redis.call('HINCRBY', K_ST, fld(p, 'zc'), 1)
  release(p, wait)
  return {'released', NOW, nxt}
end
redis.call('HSET', K_ST, fld(p, 'ls'), fmt(base), fld(p, 'ln'), fmt(nxt))
redis.call('HDEL', K_ST, fld(p, 'zc'))
return {'ok', NOW}
