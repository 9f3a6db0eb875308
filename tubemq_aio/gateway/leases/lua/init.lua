-- init(wake, p, lease_id, offset, max): the first start offset of a partition wins
local p, lid, offset, top = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if not booted() then return {'lost', NOW} end
if not live(p, lid) then return {'stale', NOW} end
local cmt = hgetn(p, 'cmt')
if cmt == nil then
  cmt = offset
  hset(p, 'cmt', fmt(offset))
  redis.call('HDEL', K_ST, fld(p, 'start'))
end
if top > (hgetn(p, 'mx') or -1) then hset(p, 'mx', fmt(top)) end
return {'ok', NOW, cmt}
