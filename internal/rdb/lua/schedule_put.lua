-- schedule_put: create or replace a schedule's definition. Its state
-- (paused, last_run_at, last_task_id, last_tick, created_at) survives a
-- replacement; version goes up by one, so that a scheduler still holding
-- the old definition does not move next_run_at (see schedule_record). Global
-- schedule keys only (one hash tag).
--
-- KEYS[1] def: schedule hash
-- KEYS[2] names: names index
-- KEYS[3] due: due index
-- ARGV[1] now int64: now (ms)
-- ARGV[2] name: schedule name
-- ARGV[3] next_run int64: next_run_at (ms)
-- ARGV[4..] def []any: definition field, value pairs (every definition
--   field, "" = unset)
--
-- Returns: {created int, version int, paused int}
-- created and paused are 1 or 0.

local now, name, next_run = ARGV[1], ARGV[2], ARGV[3]
local cur = redis.call('HMGET', KEYS[1], 'version', 'paused')
local created = 0
local version = tonumber(cur[1] or '0') + 1
if not cur[1] then
  created = 1
  redis.call('HSET', KEYS[1], 'name', name, 'created_at', now, 'paused', '0')
end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], 'version', version, 'updated_at', now, 'next_run_at', next_run, unpack(fields))
redis.call('ZADD', KEYS[2], 0, name)
local paused = cur[2] == '1'
if paused then
  redis.call('ZREM', KEYS[3], name)
else
  redis.call('ZADD', KEYS[3], next_run, name)
end
return {created, version, paused and 1 or 0}
