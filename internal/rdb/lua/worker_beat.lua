-- worker_beat: refresh a worker's heartbeat record (and, with status
-- "stopped", mark it stopped with WORKER_STOPPED). Fenced on the instance
-- token written at start, so a worker whose id was taken over by a new
-- process does not overwrite it. Global keys only.
--
-- KEYS[1] worker hash  KEYS[2] workers ZSET  KEYS[3] system event stream
-- ARGV[1] now (ms)  ARGV[2] worker id  ARGV[3] instance token
-- ARGV[4] events maxlen  ARGV[5..] field, value pairs (including status)
--
-- Returns "ok" or "replaced".

local now = tonumber(ARGV[1])
if redis.call('HGET', KEYS[1], 'instance') ~= ARGV[3] then
  return 'replaced'
end
local fields, stopped = {}, false
for i = 5, #ARGV, 2 do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
  if ARGV[i] == 'status' and ARGV[i + 1] == 'stopped' then stopped = true end
end
redis.call('HSET', KEYS[1], 'last_heartbeat', now, unpack(fields))
redis.call('EXPIRE', KEYS[1], 86400)
redis.call('ZADD', KEYS[2], now, ARGV[2])
if stopped then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'type', 'WORKER_STOPPED', 'worker_id', ARGV[2], 'ts', now)
end
return 'ok'
