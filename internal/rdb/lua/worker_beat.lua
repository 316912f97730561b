-- worker_beat: refresh a worker's heartbeat record, fenced on the instance
-- token written at start, so a worker whose id was taken over by a new
-- process does not overwrite it. Touches only the worker's own hash.
--
-- KEYS[1] worker: worker hash
-- ARGV[1] now int64: now (ms)
-- ARGV[2] instance: instance token
-- ARGV[3..] fields []any: field, value pairs
--
-- Returns: string
-- "ok" or "replaced".

if redis.call('HGET', KEYS[1], 'instance') ~= ARGV[2] then
  return 'replaced'
end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], 'last_heartbeat', ARGV[1], unpack(fields))
redis.call('EXPIRE', KEYS[1], 86400)
return 'ok'
