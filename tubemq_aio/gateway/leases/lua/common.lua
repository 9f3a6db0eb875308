-- Shared prologue of every gateway script (prepended by store.py).
-- KEYS: cfg, rl, cur, st, ready, leased, parts, acq, done of one group and scope (one hash tag).
-- ARGV[1]: the wake message "<group>|<scope>" published when a partition becomes ready; empty
-- when the caller's next script in the same round trip wakes the scope instead (acquire, ARGV[7]).
-- Redis TIME is the only clock; integers are written with %d (tostring would round them).
local K_CFG, K_RL, K_CUR, K_ST = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_READY, K_LEASED, K_PARTS, K_ACQ, K_DONE = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
-- Settled lease ids remembered at most (the oldest are forgotten first).
local DONE_MAX = 10000
local WAKE = ARGV[1]
local T = redis.call('TIME')
local NOW = tonumber(T[1]) * 1000 + math.floor(tonumber(T[2]) / 1000)
local NOW_US = NOW * 1000

local function fmt(n) return string.format('%d', n) end
local function fld(p, name) return p .. '|' .. name end
local function hget(p, name) return redis.call('HGET', K_ST, fld(p, name)) end
local function hgetn(p, name)
  local v = redis.call('HGET', K_ST, fld(p, name))
  if v then return tonumber(v) end
  return nil
end
local function hset(p, name, v) redis.call('HSET', K_ST, fld(p, name), v) end
local function booted() return redis.call('HEXISTS', K_CFG, 'boot') == 1 end
local function live(p, lid)
  if hget(p, 'lid') ~= lid then return false end
  local exp = redis.call('ZSCORE', K_LEASED, p)
  return exp ~= false and tonumber(exp) > NOW
end
-- Rate-limited groups read one batch at a time: the limiter is charged only when a batch is
-- booked, so concurrent reads would each pass the check and overdraw it. Field rlh of cfg holds
-- "<lease id>|<until ms>" while a read runs.
local HOLD_RETRY_MS = 20
local function rate_hold_until()
  local h = redis.call('HGET', K_CFG, 'rlh')
  if not h then return 0 end
  return tonumber(string.sub(h, string.find(h, '|', 1, true) + 1))
end
local function drop_rate_hold(lid)
  local h = redis.call('HGET', K_CFG, 'rlh')
  if h and string.sub(h, 1, #lid + 1) == lid .. '|' then redis.call('HDEL', K_CFG, 'rlh') end
end
local function release(p, wait)
  local lid = hget(p, 'lid')
  if lid then
    drop_rate_hold(lid)
    redis.call('HDEL', K_ACQ, lid)
    hset(p, 'last', lid)
  else
    redis.call('HDEL', K_ST, fld(p, 'last'))
  end
  redis.call('HDEL', K_ST, fld(p, 'lid'), fld(p, 'lexp'), fld(p, 'lat'), fld(p, 'lh'),
    fld(p, 'ls'), fld(p, 'ln'))
  redis.call('ZREM', K_LEASED, p)
  if hget(p, 'gone') ~= '1' then
    redis.call('ZADD', K_READY, fmt(NOW + wait), p)
    if WAKE ~= '' then redis.call('PUBLISH', 'tgw:wake', WAKE) end
  end
end
local function rate_params()
  local rate = tonumber(redis.call('HGET', K_CFG, 'rate') or '0')
  local burst = tonumber(redis.call('HGET', K_CFG, 'burst') or '0')
  if burst < 1 then burst = 1 end
  return rate, burst
end
local function stored_tat()
  local v = redis.call('GET', K_RL)
  if v then return tonumber(v) end
  return nil
end
-- How lease ``lid`` was settled ('acked', 'nacked', 'released'), while it is remembered.
local function settled_as(lid)
  for _, o in ipairs({'acked', 'nacked', 'released'}) do
    local until_ms = redis.call('ZSCORE', K_DONE, lid .. '|' .. o)
    if until_ms and tonumber(until_ms) > NOW then return o end
  end
  return nil
end
-- Remember how lease ``lid`` ended for ``life`` ms (at least a lease's length).
local function remember(lid, o, life)
  redis.call('ZREMRANGEBYSCORE', K_DONE, '-inf', fmt(NOW))
  redis.call('ZADD', K_DONE, fmt(NOW + life), lid .. '|' .. o)
  local n = redis.call('ZCARD', K_DONE)
  if n > DONE_MAX then redis.call('ZREMRANGEBYRANK', K_DONE, 0, n - DONE_MAX - 1) end
end
-- A read-ahead in flight (model: read_ahead.ReadAhead): field "<p>|ra" of cur holds
-- "<token>|<until ms>"; token '' once a reset voided it or held p for a lease it cleared whose
-- holder may still be reading (see reset.lua). Answers token, until (nil, nil: none).
local function read_mark(p)
  local held = redis.call('HGET', K_CUR, p .. '|ra')
  if not held then return nil, nil end
  local token, until_ms = string.match(held, '^(.*)|(%-?%d+)$')
  return token, tonumber(until_ms)
end
-- When partition p, ready at ``at``, may be leased: not before its read-ahead's deadline.
local function eligible_at(p, at)
  local _, until_ms = read_mark(p)
  if until_ms and until_ms > at then return until_ms end
  return at
end
