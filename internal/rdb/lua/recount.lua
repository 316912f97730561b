-- recount: recompute a queue's depth counter from its live structures, to
-- repair drift after manual edits: undelivered stream entries + running
-- leases + scheduled (pending and retrying) tasks + tasks held back by
-- key_concurrency + workflow nodes waiting + tasks in key queues (the
-- fair state's per band counts). Each band is first
-- trimmed up to the group's last delivered entry (claims do that as they
-- go; this also covers entries older versions left), so XLEN counts the
-- undelivered ones.
--
-- KEYS[1] depth: depth counter
-- KEYS[2] lease: lease ZSET
-- KEYS[3] schedule: schedule ZSET
-- KEYS[4..13] bands: band streams p0..p9
-- KEYS[14] held: held counter
-- KEYS[15] waiting: waiting ZSET
-- KEYS[16] fair_state: fair state hash
-- ARGV[1] group: consumer group
--
-- Returns: {old int, new int}
-- the old depth and the new one.
--
--! include: after_id

local depth = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3]) +
  math.max(0, tonumber(redis.call('GET', KEYS[14]) or '0')) + redis.call('ZCARD', KEYS[15])
for b = 0, 9 do
  depth = depth + math.max(0, tonumber(redis.call('HGET', KEYS[16], 'n' .. b) or '0'))
end
for i = 4, 13 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[i])
    if ok then
      for _, g in ipairs(groups) do
        local name, last = nil, nil
        for j = 1, #g, 2 do
          if g[j] == 'name' then name = g[j + 1]
          elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
        end
        local minid = name == ARGV[1] and last and last ~= '0-0' and after_id(last)
        if minid then
          redis.call('XTRIM', KEYS[i], 'MINID', minid)
        end
      end
    end
    depth = depth + redis.call('XLEN', KEYS[i])
  end
end
local old = tonumber(redis.call('GET', KEYS[1]) or '0')
redis.call('SET', KEYS[1], depth)
return {old, depth}
