-- worker_start: register a worker's heartbeat record, refusing an id that a
-- live worker already uses. Global keys only.
--
-- KEYS[1] worker hash  KEYS[2] workers ZSET  KEYS[3] system event stream
-- ARGV[1] now (ms)  ARGV[2] worker id  ARGV[3] stale after (ms)
-- ARGV[4] events maxlen  ARGV[5..] field, value pairs of the record
--
-- Returns "ok" or "duplicate".

local now = tonumber(ARGV[1])
local cur = redis.call('HMGET', KEYS[1], 'status', 'last_heartbeat')
if cur[1] and cur[1] ~= 'stopped' and tonumber(cur[2] or '0') > now - tonumber(ARGV[3]) then
  return 'duplicate'
end
redis.call('DEL', KEYS[1])
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], 'last_heartbeat', now, unpack(fields))
redis.call('EXPIRE', KEYS[1], 86400)
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 86400000)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'type', 'WORKER_STARTED', 'worker_id', ARGV[2], 'ts', now)
return 'ok'
