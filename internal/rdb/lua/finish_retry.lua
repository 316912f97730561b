-- finish_retry: finalize a running attempt that failed retryably with attempts left.
-- Fenced on status running + attempt + worker. A cancel request wins: the
-- task ends cancelled instead (see cancel_running). Otherwise, in order: task
-- hash (retrying; attempt unchanged — it grows at promotion) ->
-- TASK_RETRY_SCHEDULED -> schedule entry at now + delay (and expiry index
-- again if the task has a deadline) -> XACK (trimmed at claim), lease
-- removal; stats. Its idempotency key still answers in progress: the task
-- is live. A call whose first run
-- landed but whose reply was lost answers what that run did.
--
-- KEYS[1] task: task hash
-- KEYS[2] lease: lease ZSET
-- KEYS[3] events: event stream
-- KEYS[4] band: band stream
-- KEYS[5] depth: depth counter
-- KEYS[6] stats: stats hash (minute)
-- KEYS[7] schedule: schedule ZSET
-- KEYS[8] expiry: expiry ZSET
-- KEYS[9] key_running: key-running hash
-- KEYS[10] held: held counter
-- KEYS[11] limited: limited flag
-- KEYS[12] wake: wake stream
-- KEYS[13..22] bands: band streams p0..p9 (a task held on the same
--   concurrency key goes back to its own band)
-- KEYS[23] retained: retained counts hash
-- KEYS[24] outbox: workflow outbox stream
-- KEYS[25] key_freed: key slot release time (see key_freed)
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] id: task id
-- ARGV[3] attempt int: attempt
-- ARGV[4] worker_id: worker id
-- ARGV[5] group: consumer group
-- ARGV[6] idem_prefix: idempotency key prefix
-- ARGV[7] events_max_len int64: events maxlen
-- ARGV[8] failed_ret_s int64: failed retention (s)
-- ARGV[9] attempts_cap int: attempts history cap
-- ARGV[10] delay_ms int64: retry delay (ms)
-- ARGV[11] class: error class
-- ARGV[12] msg: error message
-- ARGV[13] key_wait_prefix: key wait list prefix
-- ARGV[14] task_prefix: task key prefix
-- ARGV[15] claim: claim nonce the attempt must have been started by ("" =
--   not checked; see fence)
-- ARGV[16] check_attempts: "1" = the caller does not know the task's
--   max_attempts (a remote worker): with no attempts left, write nothing
--   and answer "exhausted", and so does a call sent again after the task
--   was dead-lettered, failed or deleted; the caller then finalizes with
--   finish_dead, which answers for the attempt
--
-- The entry is acked in the task's own band (KEYS[13..22] by its priority
-- field), whatever band KEYS[4] names.
--
-- Returns: string
-- "ok", "cancelled", "lease_lost" or "exhausted".
--
--! include: emit, stat, bucket_field, fence, landed, finish_attempt, release_entry, release_key
--! include: wake_limited, limit_keys, cancel_running

local finish = {task_key = KEYS[1], lease = KEYS[2], events = KEYS[3], stream = KEYS[4], depth = KEYS[5],
  stats = KEYS[6], now = tonumber(ARGV[1]), tid = ARGV[2], group = ARGV[5], idem_prefix = ARGV[6],
  events_maxlen = ARGV[7], retained = KEYS[23], retention = ARGV[8], attempts_cap = tonumber(ARGV[9]),
  limits = limit_keys(9, 13, {freed = KEYS[25], keywait_prefix = ARGV[13], task_prefix = ARGV[14], now = ARGV[1]}), outbox = KEYS[24]}
local checked = ARGV[16] == '1'
local h, seen = fence(KEYS[1], ARGV[3], ARGV[4], nil, nil, ARGV[15])
if not h then
  if checked and not seen.status then return 'exhausted' end
  local done = landed(KEYS[1], seen, ARGV[3], ARGV[4], {'retry', 'cancelled', 'dead_lettered', 'failed'})
  if done == 'retry' then return 'ok' end
  if done == 'dead_lettered' or done == 'failed' then
    return checked and 'exhausted' or 'lease_lost'
  end
  return done or 'lease_lost'
end
finish.stream = h.priority and finish.limits.streams[tonumber(h.priority)] or finish.stream
if h.cancel_requested == '1' then
  cancel_running(finish, h, ARGV[12])
  return 'cancelled'
end
if checked and tonumber(h.attempt) >= tonumber(h.max_attempts) then
  return 'exhausted'
end

local delay = tonumber(ARGV[10])
local due = finish.now + delay
local dur = finish_attempt(finish, h, 'retrying', 'retry', ARGV[11], ARGV[12],
  {'retryable', '1', 'retry_delay_ms', delay, 'available_at', due})
emit(KEYS[3], ARGV[7], 'TASK_RETRY_SCHEDULED', finish.tid, h.type, h.attempt, finish.now, ARGV[4],
  cjson.encode({retry_delay_ms = delay, next_attempt = tonumber(h.attempt) + 1, error_class = ARGV[11]}))
redis.call('ZADD', KEYS[7], due, finish.tid)
if h.expires_at and h.expires_at ~= '' then
  redis.call('ZADD', KEYS[8], h.expires_at, finish.tid)
end
release_entry(finish, h)
release_key(finish.limits, h)
wake_limited(finish.limits)
redis.call('HDEL', KEYS[1], 'stream_id')
stat(KEYS[6], 'retried', 1)
stat(KEYS[6], 'run_ms_sum', dur)
stat(KEYS[6], bucket_field('run_b', dur), 1)
return 'ok'
