-- schedule_record: record what a scheduler did for a tick, or what a manual
-- trigger did. It only moves forward: a tick at or before last_tick is
-- already recorded (another scheduler got there first) and changes nothing;
-- last_run_at and last_task_id move only to a later run. next_run_at moves
-- only when the definition is still the version the scheduler read and the
-- schedule is not paused. Global schedule keys only (one hash tag).
--
-- KEYS[1] schedule hash  KEYS[2] due index
-- ARGV[1] now (ms)  ARGV[2] "tick" | "trigger"  ARGV[3] name
-- ARGV[4] tick (ms; "tick" only)  ARGV[5] next_run_at (ms; "tick" only)
-- ARGV[6] version read  ARGV[7] task id ("" when no task was made)
-- ARGV[8] error ("" when none)
--
-- Returns "recorded", "stale" (the tick was recorded already) or
-- "not_found".

local cur = redis.call('HMGET', KEYS[1], 'version', 'paused', 'last_tick', 'last_run_at')
if not cur[1] then return 'not_found' end
local now = tonumber(ARGV[1])
if ARGV[2] == 'tick' then
  if tonumber(ARGV[4]) <= tonumber(cur[3] or '0') then return 'stale' end
  redis.call('HSET', KEYS[1], 'last_tick', ARGV[4])
  if cur[1] == ARGV[6] and cur[2] ~= '1' then
    redis.call('HSET', KEYS[1], 'next_run_at', ARGV[5])
    redis.call('ZADD', KEYS[2], ARGV[5], ARGV[3])
  end
end
if ARGV[7] ~= '' then
  if now >= tonumber(cur[4] or '0') then
    redis.call('HSET', KEYS[1], 'last_run_at', ARGV[1], 'last_task_id', ARGV[7])
    redis.call('HDEL', KEYS[1], 'last_error', 'last_error_at')
  end
elseif ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], 'last_error', ARGV[8], 'last_error_at', ARGV[1])
end
return 'recorded'
