-- cancel: cancel a task by request. pending / queued / retrying / waiting -> cancelled
-- at once (stream or schedule entry removed, depth -1, TASK_CANCELLED,
-- retention starts). running -> the
-- cancel_requested flag is set, TASK_CANCEL_REQUESTED is emitted and the task
-- id is published on the queue's cancel channel; the worker stops the handler
-- and finalizes (cancelled on error, succeeded if it finished anyway). Atomic
-- against claim: a task is either still queued here (and cancelled) or already
-- running (and flagged).
--
-- KEYS[1] task: task hash
-- KEYS[2] schedule: schedule ZSET
-- KEYS[3] expiry: expiry ZSET
-- KEYS[4] events: event stream
-- KEYS[5] depth: depth counter
-- KEYS[6] stats: stats hash (minute)
-- KEYS[7..16] bands: band streams p0..p9
-- KEYS[17] retained: retained counts hash
-- KEYS[18] waiting: waiting ZSET
-- KEYS[19] outbox: workflow outbox stream
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] id: task id
-- ARGV[3] idem_prefix: idempotency key prefix
-- ARGV[4] events_max_len int64: events maxlen
-- ARGV[5] failed_ret_s int64: failed retention (s)
-- ARGV[6] channel: cancel channel
-- ARGV[7] cluster: "1" to publish with SPUBLISH (Redis Cluster)
-- ARGV[8] reason: why the task is cancelled
--
-- Returns: {outcome string, status? string}
-- {"cancelled"} | {"already_cancelled"} | {"requested"} |
-- {"already_requested"} | {"terminal", status} | {"not_found"}.
--
--! include: emit, stat, retain, keep_body, hget_map, wf_outbox, is_terminal

local now, tid = tonumber(ARGV[1]), ARGV[2]
local h = hget_map(KEYS[1], {'status', 'priority', 'attempt', 'type', 'idem_key', 'stream_id', 'cancel_requested', 'worker_id',
  'ret', 'wf'})
local st = h.status
if not st then return {'not_found'} end
if st == 'cancelled' then return {'already_cancelled'} end -- cancelling twice is not an error
if is_terminal(st) then
  return {'terminal', st}
end
if st == 'running' then
  if h.cancel_requested == '1' then return {'already_requested'} end
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  emit(KEYS[4], ARGV[4], 'TASK_CANCEL_REQUESTED', tid, h.type, h.attempt, now, h.worker_id, cjson.encode({reason = ARGV[8]}))
  redis.call(ARGV[7] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[6], tid)
  return {'requested'}
end
-- pending, queued, retrying or waiting
if st == 'waiting' then redis.call('ZREM', KEYS[18], tid) end
if h.stream_id and h.stream_id ~= '' then
  keep_body(KEYS[1], KEYS[7 + tonumber(h.priority)], h.stream_id)
  redis.call('XDEL', KEYS[7 + tonumber(h.priority)], h.stream_id)
  redis.call('HDEL', KEYS[1], 'stream_id')
end
redis.call('ZREM', KEYS[2], tid)
redis.call('ZREM', KEYS[3], tid)
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'finished_at', now)
redis.call('DECR', KEYS[5])
emit(KEYS[4], ARGV[4], 'TASK_CANCELLED', tid, h.type, h.attempt, now, '', cjson.encode({reason = ARGV[8], previous_status = st}))
wf_outbox(KEYS[19], h.wf, 'cancelled', '', '')
retain({retained = KEYS[17], idem_prefix = ARGV[3], now = now}, KEYS[1], 'cancelled', ARGV[5], h)
stat(KEYS[6], 'cancelled', 1)
return {'cancelled'}
