-- run_now: make a pending or retrying task due now by moving it into its band
-- stream at once (as promotion would: TASK_QUEUED, or TASK_RETRIED with
-- attempt +1).
--
-- KEYS[1] task: task hash
-- KEYS[2] schedule: schedule ZSET
-- KEYS[3] events: event stream
-- KEYS[4..13] bands: band streams p0..p9
-- ARGV[1] now int64: now (ms)
-- ARGV[2] id: task id
-- ARGV[3] task_prefix: task key prefix
-- ARGV[4] events_max_len int64: events maxlen
-- ARGV[5] outcomes: "1": the queue's events are outcomes (no TASK_QUEUED,
--   TASK_RETRIED)
--
-- Returns: {outcome string, status? string}
-- {"queued"} | {"terminal", status} | {"conflict", status} | {"not_found"}.
--
--! include: hget_map, enqueue_due, is_terminal

local tid = ARGV[2]
local h = hget_map(KEYS[1], {'status', 'priority', 'attempt', 'type'})
if not h.status then return {'not_found'} end
local st = h.status
if is_terminal(st) then
  return {'terminal', st}
end
if st ~= 'pending' and st ~= 'retrying' then return {'conflict', st} end
local streams = {}
for b = 0, 9 do streams[b] = KEYS[4 + b] end
redis.call('ZREM', KEYS[2], tid)
redis.call('HSET', KEYS[1], 'available_at', ARGV[1])
enqueue_due({now = tonumber(ARGV[1]), task_prefix = ARGV[3], events = KEYS[3], events_maxlen = ARGV[4],
  streams = streams, outcomes = ARGV[5] == '1'}, tid, h)
return {'queued'}
