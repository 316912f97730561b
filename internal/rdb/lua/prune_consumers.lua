-- prune_consumers: remove consumers of the group that have nothing pending
-- and have been idle for a while (workers that stopped or were replaced), so
-- the consumer list does not grow with every deploy. A consumer is created
-- again by its next XREADGROUP, so removing an idle one is harmless.
--
-- KEYS[1..10] bands: band streams p0..p9
-- ARGV[1] group: consumer group
-- ARGV[2] idle_ms int64: minimum idle time (ms)
--
-- Returns: int
-- how many consumers were removed.

local removed = 0
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[i], ARGV[1])
    if ok then
      for _, consumer in ipairs(consumers) do
        local name, pending, idle = nil, 0, 0
        for j = 1, #consumer, 2 do
          if consumer[j] == 'name' then name = consumer[j + 1]
          elseif consumer[j] == 'pending' then pending = tonumber(consumer[j + 1])
          elseif consumer[j] == 'idle' then idle = tonumber(consumer[j + 1]) end
        end
        if name and pending == 0 and idle >= tonumber(ARGV[2]) then
          redis.call('XGROUP', 'DELCONSUMER', KEYS[i], ARGV[1], name)
          removed = removed + 1
        end
      end
    end
  end
end
return removed
