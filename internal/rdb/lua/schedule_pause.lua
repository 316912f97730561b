-- schedule_pause: pause or resume a schedule. A paused schedule leaves the
-- due index, so no scheduler fires it; resuming puts it back at the next
-- tick after now (ticks missed while paused are not fired). Global schedule
-- keys only (one hash tag).
--
-- KEYS[1] def: schedule hash
-- KEYS[2] due: due index
-- ARGV[1] now int64: now (ms)
-- ARGV[2] action: "pause" | "resume"
-- ARGV[3] name: schedule name
-- ARGV[4] next_run int64: next_run_at (ms) for resume
--
-- Returns: int
-- -1 for an unknown schedule, 1 when the state changed, 0 when it already
-- was so.

local paused = redis.call('HGET', KEYS[1], 'paused')
if not paused then return -1 end
if ARGV[2] == 'pause' then
  if paused == '1' then return 0 end
  redis.call('HSET', KEYS[1], 'paused', '1', 'updated_at', ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[3])
  return 1
end
if paused ~= '1' then return 0 end
redis.call('HSET', KEYS[1], 'paused', '0', 'updated_at', ARGV[1], 'next_run_at', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
return 1
