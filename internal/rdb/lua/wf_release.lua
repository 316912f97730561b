-- wf_release: carry out a workflow's release of one node, in the node's queue
-- slot. Only a task still waiting moves: "run" makes it queued (a stream
-- entry in its band, TASK_QUEUED) or, with a delay, pending (TASK_PENDING),
-- its delay and ttl counting from now, its deps' outcomes written on it
-- (field deps, read by claims); "cancel" ends it cancelled with the given
-- error class (its end goes to the queue's workflow outbox like any node's
-- end, where the workflow finds it already known).
--
-- KEYS[1] task: task hash
-- KEYS[2] waiting: waiting ZSET
-- KEYS[3] schedule: schedule ZSET
-- KEYS[4] expiry: expiry ZSET
-- KEYS[5] events: event stream
-- KEYS[6] depth: depth counter
-- KEYS[7] retained: retained counts hash
-- KEYS[8] outbox: workflow outbox stream
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] id: task id
-- ARGV[3] kind: "run" or "cancel"
-- ARGV[4] detail: run: the deps' outcomes JSON; cancel: the error class
-- ARGV[5] stream_prefix: band stream prefix
-- ARGV[6] events_max_len int64: events maxlen
-- ARGV[7] failed_ret_s int64: failed retention (s)
-- ARGV[8] idem_prefix: idempotency key prefix
-- ARGV[9] outcomes: "1": the queue's events are outcomes (no TASK_PENDING,
--   TASK_QUEUED)
--
-- Safe to send twice: a task no longer waiting is left as it is.
--
-- Returns: string
-- the task's status after the call ("" when it is gone).
--
--! include: emit, retain, wf_outbox

local tk, tid = KEYS[1], ARGV[2]
local h = redis.call('HMGET', tk, 'status', 'priority', 'type', 'dl', 'tl', 'wf', 'ret')
if h[1] ~= 'waiting' then return h[1] or '' end
local now = ARGV[1]
redis.call('ZREM', KEYS[2], tid)
if ARGV[3] == 'cancel' then
  local msg = ARGV[4] == 'DependencyFailed' and 'a dependency ended other than succeeded' or 'the workflow was cancelled'
  redis.call('HSET', tk, 'status', 'cancelled', 'finished_at', now, 'error_class', ARGV[4], 'error_message', msg)
  redis.call('HDEL', tk, 'dl', 'tl')
  redis.call('DECR', KEYS[6])
  emit(KEYS[5], ARGV[6], 'TASK_CANCELLED', tid, h[3], '1', now, '',
    cjson.encode({reason = msg, previous_status = 'waiting', error_class = ARGV[4]}))
  wf_outbox(KEYS[8], h[6], 'cancelled', '', ARGV[4])
  retain({retained = KEYS[7], idem_prefix = ARGV[8], now = now}, tk, 'cancelled', ARGV[7], {ret = h[7]})
  return 'cancelled'
end
local due = tonumber(now) + tonumber(h[4] or '0')
local f = {'deps', ARGV[4], 'available_at', due}
if h[5] then
  local exp = tonumber(now) + tonumber(h[5])
  f[#f + 1] = 'expires_at'; f[#f + 1] = exp
  redis.call('ZADD', KEYS[4], exp, tid)
end
redis.call('HDEL', tk, 'dl', 'tl')
if h[4] then
  f[#f + 1] = 'status'; f[#f + 1] = 'pending'
  redis.call('HSET', tk, unpack(f))
  redis.call('ZADD', KEYS[3], due, tid)
  if ARGV[9] ~= '1' then emit(KEYS[5], ARGV[6], 'TASK_PENDING', tid, h[3], '1', now, '', '') end
  return 'pending'
end
local sid = redis.call('XADD', ARGV[5] .. h[2], '*', 't', tid, 'a', '1')
f[#f + 1] = 'status'; f[#f + 1] = 'queued'; f[#f + 1] = 'stream_id'; f[#f + 1] = sid
redis.call('HSET', tk, unpack(f))
if ARGV[9] ~= '1' then emit(KEYS[5], ARGV[6], 'TASK_QUEUED', tid, h[3], '1', now, '', '') end
return 'queued'
