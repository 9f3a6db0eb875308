-- hk_clients(KEYS: clients set, seen zset): {now_ms, scope, last_seen_ms or -1, ...} over both.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
local done = {}
local seen = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #seen, 2 do
  done[seen[i]] = true
  out[#out + 1] = seen[i]
  out[#out + 1] = math.floor(tonumber(seen[i + 1]))
end
for _, s in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not done[s] then
    out[#out + 1] = s
    out[#out + 1] = -1
  end
end
return out
