-- reclaim: take over tasks whose lease expired (their worker died or
-- stalled). Each moves to the reclaiming worker with attempt +1, a new lease
-- and TASK_LEASE_LOST (the lost attempt is recorded in the history only: the
-- new attempt starts with no error). Beyond the free slots the reclaiming
-- worker has, an expired task goes back to its band stream instead (queued,
-- attempt +1, TASK_LEASE_LOST {requeued: true}), so a busy queue's peers
-- start it in order rather than leaving it until a slot frees up. A task
-- whose attempts are used up is dead-lettered with error_class WorkerLost
-- and not run again. A task with a cancel request ends cancelled instead,
-- whatever its attempts (a cancel request is never retried: the same end
-- as its finalize would have written, see cancel_running). The old
-- worker's later finalize is refused by its fence.
-- A lease the reclaiming process itself still runs (listed in ARGV), or that
-- this worker took less than a lease ago, is renewed, never taken over: one
-- process never runs a task twice at once.
--
-- KEYS[1] lease: lease ZSET
-- KEYS[2] events: event stream
-- KEYS[3] depth: depth counter
-- KEYS[4] dlq: DLQ index
-- KEYS[5] stats: stats hash (minute)
-- KEYS[6..15] bands: band streams p0..p9
-- KEYS[16] key_running: key-running hash
-- KEYS[17] held: held counter
-- KEYS[18] limited: limited flag
-- KEYS[19] wake: wake stream
-- KEYS[20] retained: retained counts hash
-- KEYS[21] outbox: workflow outbox stream
-- KEYS[22] key_freed: key slot release time (see key_freed)
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] lease_ms int64: lease duration (ms)
-- ARGV[3] worker_id: reclaiming worker id
-- ARGV[4] group: consumer group
-- ARGV[5] task_prefix: task key prefix
-- ARGV[6] idem_prefix: idempotency key prefix
-- ARGV[7] room int: max tasks to take over
-- ARGV[8] events_max_len int64: events maxlen
-- ARGV[9] failed_ret_s int64: failed retention (s)
-- ARGV[10] attempts_cap int: attempts history cap
-- ARGV[11] dlq_enabled: "1" = DLQ enabled
-- ARGV[12] dlq_max_len int64: DLQ maxlen
-- ARGV[13] nonce: call nonce (see replayed)
-- ARGV[14] key_wait_prefix: key wait list prefix
-- ARGV[15..] mine []{id, attempt int}: pairs of task id, attempt the
--   reclaiming process runs now
--
-- Returns: []string
-- the tasks taken over, one flat list (see claimed_put): per task a
-- head "<n> <attempt> <timeout_ms> <max_attempts> <created_at>
-- <cancel_requested> <priority> <id>", then type, payload, metadata[,
-- idem_key[, wf, deps]].
--
--! include: emit, history_field, trim_history, hget_map, claimed_put, replayed, release_entry
--! include: release_key, wake_limited, limit_keys, bury, cancel_running

local now_s = ARGV[1]
local now = tonumber(now_s)
local worker, nonce = ARGV[3], ARGV[13]
local lease_s = tostring(now + tonumber(ARGV[2]))
local room = tonumber(ARGV[7])
local again = replayed(KEYS[1], lease_s, worker, nonce, ARGV[5])
if #again > 0 then return again end

local mine = {}
for i = 15, #ARGV, 2 do mine[ARGV[i]] = ARGV[i + 1] end
local limits = limit_keys(16, 6, {freed = KEYS[22], keywait_prefix = ARGV[14], task_prefix = ARGV[5], now = now_s})

local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 100)
local out = {}
local fields = {'status', 'attempt', 'worker_id', 'stream_id', 'type', 'idem_key', 'started_at',
  'max_attempts', 'cancel_requested', 'priority', 'payload', 'timeout_ms', 'created_at', 'metadata',
  'previous_attempts', 'ckey', 'ret', 'wf', 'deps'}
for _, tid in ipairs(expired) do
  local task_key = ARGV[5] .. tid
  local h = hget_map(task_key, fields)
  local finish = {task_key = task_key, lease = KEYS[1], events = KEYS[2], depth = KEYS[3], dlq_key = KEYS[4],
    stats = KEYS[5], stream = KEYS[6 + tonumber(h.priority or '0')], now = now, tid = tid, group = ARGV[4],
    idem_prefix = ARGV[6], events_maxlen = ARGV[8], retained = KEYS[20], retention = ARGV[9], attempts_cap = tonumber(ARGV[10]),
    dlq = ARGV[11] == '1', dlq_maxlen = tonumber(ARGV[12]), task_prefix = ARGV[5], limits = limits,
    outbox = KEYS[21]}
  if h.status ~= 'running' then
    redis.call('ZREM', KEYS[1], tid) -- stale lease of a task that moved on
  elseif h.worker_id == worker and (mine[tid] == h.attempt
      or tonumber(h.started_at or '0') > now - tonumber(ARGV[2])) then
    -- Still running here (or claimed by this worker less than a lease ago,
    -- its reply perhaps still on the way): renew.
    redis.call('ZADD', KEYS[1], 'XX', lease_s, tid)
  elseif h.cancel_requested == '1' then
    cancel_running(finish, h, 'lease expired after a cancel request')
  elseif tonumber(h.attempt) >= tonumber(h.max_attempts) then
    bury(finish, h, 'WorkerLost', 'the worker running the last attempt stopped renewing its lease', '1')
  else
    local hf, hv = history_field(h, h.worker_id, h.started_at or now_s, now_s, 'lease_lost', 'WorkerLost',
      'lease expired')
    local attempt = tostring(tonumber(h.attempt) + 1)
    local meta = {previous_worker = h.worker_id, previous_attempt = tonumber(h.attempt)}
    if room > 0 then
      room = room - 1
      redis.call('HSET', task_key, hf, hv, 'attempt', attempt, 'worker_id', worker, 'started_at', now_s, 'claim', nonce)
      redis.call('HDEL', task_key, 'finished_at', 'error_class', 'error_message', 'retryable', 'retry_delay_ms')
      redis.call('ZADD', KEYS[1], lease_s, tid)
      -- The stream entry stays pending under the old consumer: its data was
      -- trimmed at claim, and XCLAIM of a trimmed entry would drop it from the
      -- pending list. Whoever finalizes acks it.
      claimed_put(out, tid, h, attempt)
    else
      release_entry(finish, h)
      release_key(limits, h)
      wake_limited(limits)
      local sid = redis.call('XADD', finish.stream, '*', 't', tid, 'a', attempt)
      redis.call('HSET', task_key, hf, hv, 'status', 'queued', 'attempt', attempt, 'stream_id', sid)
      redis.call('HDEL', task_key, 'worker_id', 'started_at', 'finished_at', 'claim', 'error_class', 'error_message',
        'retryable', 'retry_delay_ms')
      meta.requeued = true
    end
    trim_history(task_key, h, finish.attempts_cap)
    emit(KEYS[2], ARGV[8], 'TASK_LEASE_LOST', tid, h.type, attempt, now_s, worker, cjson.encode(meta))
  end
end
return out
