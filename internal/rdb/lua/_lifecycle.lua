-- lifecycle: moves of a whole task: expiry, cancel, dead-letter, due, DLQ requeue and discard.
-- Helpers prepended to the scripts that include them (never run on their own).

-- expire_task moves a not-yet-started task to expired: removes its stream or
-- schedule entry and index entries, decrements depth, emits TASK_EXPIRED
-- and starts retention (a replay of its idempotency key now answers it as
-- failed: the record's state is the task's status).
-- ctx.streams is a table band -> stream key; entry_fields, when given, is
-- the fields of the task's stream entry (see keep_body). A workflow node's
-- end goes to ctx.outbox (h.wf).
--! uses: emit, retain, keep_body, wf_outbox
local function expire_task(ctx, tid, h, entry_fields)
  local task_key = ctx.task_prefix .. tid
  redis.call('HSET', task_key, 'status', 'expired', 'finished_at', ctx.now)
  if h.stream_id and h.stream_id ~= '' then
    local stream = ctx.streams[tonumber(h.priority)]
    keep_body(task_key, stream, h.stream_id, entry_fields)
    redis.call('XDEL', stream, h.stream_id)
    redis.call('HDEL', task_key, 'stream_id')
  end
  redis.call('ZREM', ctx.schedule, tid)
  redis.call('ZREM', ctx.expiry, tid)
  redis.call('DECR', ctx.depth)
  emit(ctx.events, ctx.events_maxlen, 'TASK_EXPIRED', tid, h.type, h.attempt, ctx.now, '', '')
  wf_outbox(ctx.outbox, h.wf, 'expired', '', '')
  retain(ctx, task_key, 'expired', ctx.retention, h)
end

-- cancel_running ends a running attempt whose handler returned an error
-- after a cancel request: cancelled (never retried), retention TTL,
-- TASK_CANCELLED, entry released, depth -1.
-- A cancel request wins over a retry or a dead-letter.
--! uses: emit, stat, retain, finish_attempt, release_entry, release_key, wake_limited, wf_outbox
local function cancel_running(finish, h, err_msg)
  local dur = finish_attempt(finish, h, 'cancelled', 'cancelled', 'Cancelled', err_msg, {'retryable', '0'})
  redis.call('HDEL', finish.task_key, 'retry_delay_ms', 'stream_id')
  emit(finish.events, finish.events_maxlen, 'TASK_CANCELLED', finish.tid, h.type, h.attempt, finish.now, h.worker_id,
    cjson.encode({reason = 'cancel requested while running'}))
  wf_outbox(finish.outbox, h.wf, 'cancelled', '', 'Cancelled')
  retain(finish, finish.task_key, 'cancelled', finish.retention, h)
  release_entry(finish, h)
  release_key(finish.limits, h)
  wake_limited(finish.limits)
  redis.call('DECR', finish.depth)
  stat(finish.stats, 'cancelled', 1)
  stat(finish.stats, 'run_ms_sum', dur)
end

-- bury ends a running task for good: dead_lettered with a DLQ index entry
-- (capped; the oldest leave the index and start retention), or failed with a
-- retention TTL when the DLQ is off. Then its event, idempotency record
-- (failed), entry release, depth -1 and stats. finish carries keys and settings.
-- A dead-lettered task's dedup key is released now (dedup_end): it may
-- stay in the DLQ for long, and retain runs only when it leaves.
--! uses: emit, stat, retain, bucket_field, finish_attempt, release_entry, release_key, wake_limited, wf_outbox, dedup_end
local function bury(finish, h, err_class, err_msg, retryable)
  local status = finish.dlq and 'dead_lettered' or 'failed'
  local extra = {'retryable', retryable}
  if finish.dlq then extra[3] = 'failed_at'; extra[4] = finish.now end
  local dur = finish_attempt(finish, h, status, status, err_class, err_msg, extra)
  redis.call('HDEL', finish.task_key, 'retry_delay_ms', 'stream_id')
  emit(finish.events, finish.events_maxlen, finish.dlq and 'TASK_DEAD_LETTERED' or 'TASK_FAILED', finish.tid, h.type,
    h.attempt, finish.now, h.worker_id, cjson.encode({error_class = err_class, attempts_made = tonumber(h.attempt)}))
  wf_outbox(finish.outbox, h.wf, status, '', err_class)
  if finish.dlq then
    redis.call('ZADD', finish.dlq_key, finish.now, finish.tid)
    local over = redis.call('ZCARD', finish.dlq_key) - finish.dlq_maxlen
    if over > 0 then
      local dropped = redis.call('ZPOPMIN', finish.dlq_key, over)
      for i = 1, #dropped, 2 do
        retain(finish, finish.task_prefix .. dropped[i], 'dead_lettered', finish.retention, nil)
      end
    end
  end
  if finish.dlq then
    local dk = redis.call('HGET', finish.task_key, 'dk')
    if dk then dedup_end(dk, finish.task_key, finish.tid, 'dead_lettered', finish.now) end
  else
    retain(finish, finish.task_key, 'failed', finish.retention, h)
  end
  release_entry(finish, h)
  release_key(finish.limits, h)
  wake_limited(finish.limits)
  redis.call('DECR', finish.depth)
  stat(finish.stats, finish.dlq and 'dead_lettered' or 'failed', 1)
  stat(finish.stats, 'run_ms_sum', dur)
  stat(finish.stats, bucket_field('run_b', dur), 1)
end

-- enqueue_due moves a pending or retrying task into its band stream:
-- pending -> queued (TASK_QUEUED); retrying -> queued with attempt +1
-- (TASK_RETRIED); ctx.outcomes (events: outcomes) leaves both events out.
-- The caller has removed its schedule entry.
--! uses: emit
local function enqueue_due(ctx, tid, h)
  local attempt = tonumber(h.attempt)
  local etype = 'TASK_QUEUED'
  if h.status == 'retrying' then
    attempt = attempt + 1
    etype = 'TASK_RETRIED'
  end
  local sid = redis.call('XADD', ctx.streams[tonumber(h.priority)], '*', 't', tid, 'a', attempt)
  redis.call('HSET', ctx.task_prefix .. tid, 'status', 'queued', 'attempt', attempt, 'stream_id', sid)
  if not ctx.outcomes then emit(ctx.events, ctx.events_maxlen, etype, tid, h.type, attempt, ctx.now, '', '') end
end

-- dlq_requeue_one puts a dead-lettered task that is in the DLQ index (or,
-- when allowed, a failed task) back in its queue as a fresh start: attempt
-- 1, previous_attempts +1, the last attempt's error cleared, its deadline
-- cleared unless ctx.expires_at gives a new one (a requeued task must be able
-- to run), the history trimmed so that it stays within the cap, TASK_QUEUED
-- {reason: requeue}, depth +1, and its idempotency record back to
-- processing with a fresh TTL (re-created if it expired; left alone if
-- another task owns it).
-- ctx: now, task_prefix, idem_prefix, dlq, events, events_maxlen, depth,
-- streams, expiry, expires_at ("" = none), attempts_cap, idem_ttl,
-- allow_failed. Returns "requeued", "conflict" or "not_found".
--! uses: emit, hget_map, trim_history_to, retain_logs
local function dlq_requeue_one(ctx, tid)
  local task_key = ctx.task_prefix .. tid
  local h = hget_map(task_key, {'status', 'priority', 'type', 'idem_key', 'fingerprint', 'previous_attempts',
    'max_attempts', 'lg'})
  if not h.status then return 'not_found' end
  if h.status == 'dead_lettered' then
    -- A discarded or dropped entry has left the index: it is not in the DLQ.
    if not redis.call('ZSCORE', ctx.dlq, tid) then return 'not_found' end
  elseif not (h.status == 'failed' and ctx.allow_failed) then
    return 'conflict'
  end
  redis.call('ZREM', ctx.dlq, tid)
  redis.call('PERSIST', task_key)
  -- Its logs stay while it is live again; the new run appends to them.
  if h.lg then retain_logs(task_key, h.lg, -1) end
  local sid = redis.call('XADD', ctx.streams[tonumber(h.priority)], '*', 't', tid, 'a', 1)
  redis.call('HSET', task_key, 'status', 'queued', 'attempt', 1, 'stream_id', sid, 'available_at', ctx.now,
    'previous_attempts', tonumber(h.previous_attempts or '0') + 1)
  redis.call('HDEL', task_key, 'finished_at', 'failed_at', 'cancel_requested', 'worker_id', 'started_at',
    'retryable', 'retry_delay_ms', 'error_class', 'error_message', 'claim')
  if ctx.expires_at ~= '' then
    redis.call('HSET', task_key, 'expires_at', ctx.expires_at)
    redis.call('ZADD', ctx.expiry, ctx.expires_at, tid)
  else
    redis.call('HDEL', task_key, 'expires_at')
    redis.call('ZREM', ctx.expiry, tid)
  end
  -- Room for every attempt of the new run: the history never outgrows the cap.
  trim_history_to(task_key, ctx.attempts_cap - tonumber(h.max_attempts or '1'))
  redis.call('INCR', ctx.depth)
  emit(ctx.events, ctx.events_maxlen, 'TASK_QUEUED', tid, h.type, 1, ctx.now, '', cjson.encode({reason = 'requeue'}))
  if h.idem_key and h.idem_key ~= '' then
    -- The record again with a fresh TTL (re-created if it expired), unless
    -- the key now belongs to another task. The task's own status says it
    -- is in progress again.
    local k = ctx.idem_prefix .. h.idem_key
    local raw = redis.call('GET', k)
    if not raw or raw == tid then
      redis.call('SET', k, tid, 'EX', ctx.idem_ttl)
    end
  end
  return 'requeued'
end

-- dlq_discard_one removes a task from the DLQ index: it stays
-- dead_lettered with metadata.discarded = true and its retention starts.
-- Returns "discarded" or "not_found".
--! uses: retain
local function dlq_discard_one(ctx, tid)
  if not redis.call('ZSCORE', ctx.dlq, tid) then return 'not_found' end
  local task_key = ctx.task_prefix .. tid
  redis.call('ZREM', ctx.dlq, tid)
  local meta = {}
  local v = redis.call('HMGET', task_key, 'metadata', 'ret', 'idem_key')
  local raw = v[1]
  if raw and raw ~= '' then
    local ok, v = pcall(cjson.decode, raw)
    if ok and type(v) == 'table' then meta = v end
  end
  meta.discarded = true
  redis.call('HSET', task_key, 'metadata', cjson.encode(meta))
  retain(ctx, task_key, 'dead_lettered', ctx.retention, {ret = v[2], idem_key = v[3]})
  return 'discarded'
end
