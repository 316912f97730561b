-- worker_start: write a worker's heartbeat record, refusing an id that a live
-- worker already uses. It touches only the worker's own hash, so it stays in
-- one Cluster slot; the caller then indexes the worker and emits
-- WORKER_STARTED.
--
-- KEYS[1] worker: worker hash
-- ARGV[1] now int64: now (ms)
-- ARGV[2] stale_after_ms int64: stale after (ms)
-- ARGV[3..] fields []any: field, value pairs
--
-- Returns: string
-- "ok" or "duplicate".

local now = tonumber(ARGV[1])
local cur = redis.call('HMGET', KEYS[1], 'status', 'last_heartbeat')
if cur[1] and cur[1] ~= 'stopped' and tonumber(cur[2] or '0') > now - tonumber(ARGV[2]) then
  return 'duplicate'
end
redis.call('DEL', KEYS[1])
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], 'last_heartbeat', now, unpack(fields))
redis.call('EXPIRE', KEYS[1], 86400)
return 'ok'
