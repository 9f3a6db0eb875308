-- acquire(wake, lease_id, lease_ms, holder, want, reclaim_max, wake_left)
-- wake_left '1': acks of this scope were settled without a wake just before, in the same round
-- trip; the scope's waiters are woken only when a partition is still due after this acquire
-- (an ack whose partition this acquire leases again frees nothing for them).
local lid, lease_ms, holder, want = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local reclaim_max = tonumber(ARGV[6])
local wake_left = ARGV[7] == '1'
if not booted() then return {'lost', NOW} end
local function answer(reply)
  if wake_left then
    local due = redis.call('ZRANGEBYSCORE', K_READY, '-inf', fmt(NOW), 'LIMIT', 0, 1)
    if due[1] then redis.call('PUBLISH', 'tgw:wake', WAKE) end
  end
  return reply
end
-- fence: the partition's kept-batch fence, handed to a new lease once ('' on a retry)
local function leased_reply(p, fence)
  return {'leased', NOW, p, hgetn(p, 'cmt') or -1, hgetn(p, 'lexp') or 0, hgetn(p, 'rc') or 0,
    hget(p, 'start') or '', tonumber(redis.call('HGET', K_CUR, p) or '-1'), fence}
end
local held = redis.call('HGET', K_ACQ, lid)
if held then return answer(leased_reply(held, '')) end
if redis.call('HGET', K_CFG, 'paused') == '1' and want == '' then return answer({'paused', NOW}) end
local rate, burst = rate_params()
if rate > 0 and want == '' then
  local tat = stored_tat() or NOW_US
  if tat < NOW_US then tat = NOW_US end
  local allow_at = tat - (1e6 / rate) * burst
  if allow_at > NOW_US then
    local wait_us = math.ceil(allow_at - NOW_US)
    return answer({'throttled', NOW, math.ceil(wait_us / 1000)})
  end
  local held_until = rate_hold_until()
  if held_until > NOW then
    return answer({'held', NOW, math.min(HOLD_RETRY_MS, held_until - NOW)})
  end
end
local expired = redis.call('ZRANGEBYSCORE', K_LEASED, '-inf', fmt(NOW), 'LIMIT', 0, reclaim_max)
for _, p in ipairs(expired) do
  redis.call('ZREM', K_LEASED, p)
  local old = hget(p, 'lid')
  if old then redis.call('HDEL', K_ACQ, old) end
  redis.call('HINCRBY', K_ST, fld(p, 'rc'), 1)
  if hget(p, 'gone') ~= '1' then redis.call('ZADD', K_READY, fmt(NOW), p) end
end
-- A partition with a read-ahead in flight (a live mark, see read_mark) is not handed out.
local pick = nil
if want ~= '' then
  local score = redis.call('ZSCORE', K_READY, want)
  if score and eligible_at(want, tonumber(score)) <= NOW then pick = want end
else
  local from = 0
  while not pick do
    local due = redis.call('ZRANGEBYSCORE', K_READY, '-inf', fmt(NOW), 'LIMIT', from, 16)
    for _, p in ipairs(due) do
      if eligible_at(p, NOW) <= NOW then
        pick = p
        break
      end
    end
    if #due < 16 then break end
    from = from + 16
  end
end
if not pick then
  -- the earliest a ready partition may be leased (in score order, until no later one can be
  -- earlier)
  local nxt, from = -1, 0
  while true do
    local r = redis.call('ZRANGE', K_READY, from, from + 15, 'WITHSCORES')
    for i = 1, #r, 2 do
      local at = tonumber(r[i + 1])
      if nxt >= 0 and at >= nxt then break end
      local e = eligible_at(r[i], at)
      if nxt < 0 or e < nxt then nxt = e end
    end
    if #r < 32 or (nxt >= 0 and tonumber(r[#r]) >= nxt) then break end
    from = from + 16
  end
  local l = redis.call('ZRANGE', K_LEASED, 0, 0, 'WITHSCORES')
  return {'none', NOW, nxt, tonumber(l[2] or '-1')}
end
if read_mark(pick) ~= nil then
  -- past its deadline: the replica is gone; where its read left the broker cursor is unknown
  redis.call('HDEL', K_CUR, pick .. '|ra', pick, pick .. '|kf')
end
redis.call('ZREM', K_READY, pick)
redis.call('ZADD', K_LEASED, fmt(NOW + lease_ms), pick)
redis.call('HSET', K_ST, fld(pick, 'lid'), lid, fld(pick, 'lexp'), fmt(NOW + lease_ms),
  fld(pick, 'lat'), fmt(NOW), fld(pick, 'lh'), holder)
redis.call('HDEL', K_ST, fld(pick, 'ls'), fld(pick, 'ln'))
redis.call('HSET', K_ACQ, lid, pick)
if rate > 0 and want == '' then
  redis.call('HSET', K_CFG, 'rlh', lid .. '|' .. fmt(NOW + lease_ms))
end
local fence = redis.call('HGET', K_CUR, pick .. '|kf') or ''
if fence ~= '' then redis.call('HDEL', K_CUR, pick .. '|kf') end
return answer(leased_reply(pick, fence))
