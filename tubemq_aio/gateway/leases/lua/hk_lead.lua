-- hk_lead(KEYS: leader key; ARGV: me, px): take or renew the housekeeper leadership of a group.
-- Compare-and-set on Redis's clock: only the holder renews; a lapsed key is free for anyone.
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, tonumber(ARGV[2]), ARGV[1]}
end
return {0, redis.call('PTTL', KEYS[1]), cur}
