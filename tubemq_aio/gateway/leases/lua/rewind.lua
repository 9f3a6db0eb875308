-- rewind(wake, p, lease_id, old, new, max): move cmt back to where the broker's partition ends
local p, lid = ARGV[2], ARGV[3]
local old, new, top = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if not booted() then return {'lost', NOW} end
if not live(p, lid) then return {'stale', NOW} end
local cmt = hgetn(p, 'cmt')
if new < old and cmt == new and not hget(p, 'ls') then return {'ok', NOW, new} end
if hget(p, 'ls') or cmt ~= old or new >= old then return {'moved', NOW, cmt or -1} end
hset(p, 'cmt', fmt(new))
hset(p, 'mx', fmt(top))
redis.call('HDEL', K_ST, fld(p, 'rc'), fld(p, 'zc'))
redis.call('HDEL', K_CUR, p, p .. '|kf')
return {'ok', NOW, new}
