-- recount: recompute a queue's depth counter from its live structures, to
-- repair drift after manual edits: undelivered stream entries + running
-- leases + scheduled (pending and retrying) tasks.
--
-- KEYS[1] depth counter  KEYS[2] lease ZSET  KEYS[3] schedule ZSET
-- KEYS[4..13] band streams p0..p9
-- ARGV[1] consumer group
--
-- Returns {old depth, new depth}.

local depth = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3])
for i = 4, 13 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local pending = 0
    local ok, summary = pcall(redis.call, 'XPENDING', KEYS[i], ARGV[1])
    if ok and type(summary) == 'table' then pending = tonumber(summary[1]) or 0 end
    depth = depth + redis.call('XLEN', KEYS[i]) - pending
  end
end
local old = tonumber(redis.call('GET', KEYS[1]) or '0')
redis.call('SET', KEYS[1], depth)
return {old, depth}
