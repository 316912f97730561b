-- schedule_record: record what a scheduler did for a tick, or what a manual
-- trigger did. It only moves forward: a tick before last_tick is already
-- recorded (another scheduler got there first) and changes nothing. The
-- same tick again changes nothing either, with one exception: a task for a
-- tick recorded as refused replaces the refusal (error_tick names that
-- tick), because schedulers in different processes may disagree and the
-- task exists whichever answered first; a refusal never replaces a task.
-- last_run_at and last_task_id move only to a later run. next_run_at moves
-- only when the definition is still the version the scheduler read and the
-- schedule is not paused. Global schedule keys only (one hash tag).
--
-- KEYS[1] def: schedule hash
-- KEYS[2] due: due index
-- ARGV[1] now int64: now (ms)
-- ARGV[2] mode: "tick" | "trigger"
-- ARGV[3] name: schedule name
-- ARGV[4] tick int64: tick (ms; "tick" only)
-- ARGV[5] next_run int64: next_run_at (ms; "tick" only)
-- ARGV[6] version: version read
-- ARGV[7] task_id: task id ("" when no task was made)
-- ARGV[8] error: error ("" when none)
--
-- Returns: string
-- "recorded", "stale" (the tick was recorded already, with another
-- outcome) or "not_found". The same outcome of the same tick recorded
-- again (a resent call) answers "recorded" and changes nothing.

local cur = redis.call('HMGET', KEYS[1], 'version', 'paused', 'last_tick', 'last_run_at', 'error_tick', 'last_task_id')
if not cur[1] then return 'not_found' end
local now = tonumber(ARGV[1])
local task, err = ARGV[7], ARGV[8]
if ARGV[2] == 'tick' then
  local tick, last = tonumber(ARGV[4]), tonumber(cur[3] or '0')
  if tick < last then return 'stale' end
  if tick == last then
    local refused = cur[5] == ARGV[4]
    if task == '' then
      -- A refusal of a tick recorded already: the same refusal again, or
      -- one that must not hide the task another scheduler made.
      if refused then return 'recorded' end
      return 'stale'
    end
    if not refused then
      if cur[6] == task then return 'recorded' end
      return 'stale'
    end
    -- The tick was recorded as refused; its task replaces the refusal.
  else
    redis.call('HSET', KEYS[1], 'last_tick', ARGV[4])
    if cur[1] == ARGV[6] and cur[2] ~= '1' then
      redis.call('HSET', KEYS[1], 'next_run_at', ARGV[5])
      redis.call('ZADD', KEYS[2], ARGV[5], ARGV[3])
    end
  end
  if task ~= '' then
    -- The latest tick made a task: no refusal stands.
    redis.call('HDEL', KEYS[1], 'last_error', 'last_error_at', 'error_tick')
  end
end
if task ~= '' then
  if now >= tonumber(cur[4] or '0') then
    redis.call('HSET', KEYS[1], 'last_run_at', ARGV[1], 'last_task_id', task)
    redis.call('HDEL', KEYS[1], 'last_error', 'last_error_at')
  end
elseif err ~= '' then
  redis.call('HSET', KEYS[1], 'last_error', err, 'last_error_at', ARGV[1], 'error_tick', ARGV[4])
end
return 'recorded'
