-- wf_lock: take, keep or give up the right to relay one queue's workflow
-- outbox, so that one process carries out its entries at a time (any may;
-- the lock only spares duplicate work).
--
-- KEYS[1] lock: relay lock
-- ARGV[1] token: holder token
-- ARGV[2] lease_ms int64: lease (ms; "0" gives it up)
--
-- Returns: int
-- 1 when the caller holds the lock after the call, else 0.

local cur = redis.call('GET', KEYS[1])
if ARGV[2] == '0' then
  if cur == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 0
end
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
