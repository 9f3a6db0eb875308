-- rate(wake, rate, burst): the shared consume limit (0 = off). What was admitted ahead of the
-- old rate's schedule stays owed (the schedule is rescaled to the new rate: setting a limit
-- again hands out no fresh burst), and a read in flight keeps its hold (rlh); off drops both.
local rate = tonumber(ARGV[2])
local old = rate_params()
local tat = stored_tat()
redis.call('HSET', K_CFG, 'rate', ARGV[2], 'burst', ARGV[3])
if rate <= 0 then redis.call('HDEL', K_CFG, 'rlh') end
if rate > 0 and old > 0 and tat and tat > NOW_US then
  if rate ~= old then  -- the same rate keeps it exactly (a PUT sent again, too)
    redis.call('SET', K_RL, fmt(math.floor(NOW_US + (tat - NOW_US) * old / rate)))
  end
else
  redis.call('DEL', K_RL)
end
return {'ok', NOW}
