-- delete_task: remove a terminal task: its hash, result and index entries.
-- An idempotency record still naming it becomes stale (its next use creates a
-- new task).
--
-- KEYS[1] task hash  KEYS[2] result key  KEYS[3] recent index  KEYS[4] DLQ index
-- ARGV[1] task id
--
-- Returns {"deleted"} | {"conflict", status} | {"not_found"}.

local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'not_found'} end
if st ~= 'succeeded' and st ~= 'failed' and st ~= 'dead_lettered' and st ~= 'cancelled' and st ~= 'expired' then
  return {'conflict', st}
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return {'deleted'}
