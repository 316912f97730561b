-- delete_task: remove a terminal task: its hash, result, log lists and index entries.
-- An idempotency record still naming it becomes stale (its next use creates a
-- new task). A task without a key deleted within a minute of its creation
-- leaves its ended marker (see mark_ended). A task whose retention had started leaves the retained counts.
--
-- KEYS[1] task: task hash
-- KEYS[2] result: result key
-- KEYS[3] recent: listing index
-- KEYS[4] dlq: DLQ index
-- KEYS[5] retained: retained counts hash
-- ARGV[1] id: task id
-- ARGV[2] now int64: now (ms)
--
-- Returns: {outcome string, status? string}
-- {"deleted"} | {"conflict", status} | {"not_found"}.
--
--! include: retained_field, mark_ended, retain_logs

local v = redis.call('HMGET', KEYS[1], 'status', 'idem_key', 'lg')
local st = v[1]
if not st then return {'not_found'} end
if st ~= 'succeeded' and st ~= 'failed' and st ~= 'dead_lettered' and st ~= 'cancelled' and st ~= 'expired' then
  return {'conflict', st}
end
local left = redis.call('PTTL', KEYS[1])
if left > 0 then
  -- The bucket retain chose: a minute one, or an hour one for long retentions.
  for _, gran in ipairs({60000, 3600000}) do
    local field = retained_field(st, tonumber(ARGV[2]) + left, gran)
    if tonumber(redis.call('HGET', KEYS[5], field) or '0') > 0 then
      if redis.call('HINCRBY', KEYS[5], field, -1) <= 0 then redis.call('HDEL', KEYS[5], field) end
      break
    end
  end
end
redis.call('DEL', KEYS[1], KEYS[2])
if v[3] then retain_logs(KEYS[1], v[3], 0) end
-- A task without a key leaves the marker an ingest call sent again looks
-- for (a keyed one's record, now stale, names it instead).
if not v[2] then mark_ended(KEYS[1], ARGV[2]) end
redis.call('LREM', KEYS[3], 1, string.sub(ARGV[1], 1, 28))
redis.call('ZREM', KEYS[4], ARGV[1])
return {'deleted'}
