-- finish_dead: finalize a running attempt that failed for good (permanent error,
-- panic, undecodable payload, unknown type or attempts exhausted).
-- Fenced on status running + attempt + worker. A cancel request wins: the
-- task ends cancelled instead (see cancel_running). Otherwise, in order:
-- task hash (dead_lettered, or failed with retention TTL when the DLQ is
-- off) -> TASK_DEAD_LETTERED / TASK_FAILED -> DLQ index entry (capped: the
-- oldest entries leave the index and their hashes start retention) ->
-- XACK (trimmed at claim), lease removal;
-- depth -1; stats. A call whose first run landed but whose reply was lost
-- answers what that run did.
--
-- KEYS[1] task: task hash
-- KEYS[2] lease: lease ZSET
-- KEYS[3] events: event stream
-- KEYS[4] band: band stream
-- KEYS[5] depth: depth counter
-- KEYS[6] stats: stats hash (minute)
-- KEYS[7] dlq: DLQ index ZSET
-- KEYS[8] key_running: key-running hash
-- KEYS[9] held: held counter
-- KEYS[10] limited: limited flag
-- KEYS[11] wake: wake stream
-- KEYS[12..21] bands: band streams p0..p9
-- KEYS[22] retained: retained counts hash
-- KEYS[23] outbox: workflow outbox stream
-- KEYS[24] key_freed: key slot release time (see key_freed)
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
-- ARGV[10] class: error class
-- ARGV[11] msg: error message
-- ARGV[12] dlq_enabled: "1" = DLQ enabled
-- ARGV[13] dlq_max_len int64: DLQ maxlen
-- ARGV[14] task_prefix: task key prefix
-- ARGV[15] retryable: "1" = retryable error
-- ARGV[16] key_wait_prefix: key wait list prefix
-- ARGV[17] claim: claim nonce the attempt must have been started by ("" =
--   not checked; see fence)
--
-- The entry is acked in the task's own band (KEYS[12..21] by its priority
-- field), whatever band KEYS[4] names.
--
-- Returns: string
-- "ok", "cancelled" or "lease_lost".
--
--! include: fence, landed, limit_keys, cancel_running, bury

local finish = {task_key = KEYS[1], lease = KEYS[2], events = KEYS[3], stream = KEYS[4], depth = KEYS[5],
  stats = KEYS[6], dlq_key = KEYS[7], now = tonumber(ARGV[1]), tid = ARGV[2], group = ARGV[5],
  idem_prefix = ARGV[6], events_maxlen = ARGV[7], retained = KEYS[22], retention = ARGV[8], attempts_cap = tonumber(ARGV[9]),
  dlq = ARGV[12] == '1', dlq_maxlen = tonumber(ARGV[13]), task_prefix = ARGV[14],
  limits = limit_keys(8, 12, {freed = KEYS[24], keywait_prefix = ARGV[16], task_prefix = ARGV[14], now = ARGV[1]}),
  outbox = KEYS[23]}
local h, seen = fence(KEYS[1], ARGV[3], ARGV[4], nil, nil, ARGV[17])
if not h then
  -- Gone: it ended, kept for 0 s (a call sent again after its reply was lost).
  if not seen.status then return 'ok' end
  local done = landed(KEYS[1], seen, ARGV[3], ARGV[4], {'dead_lettered', 'failed', 'cancelled'})
  if done == 'cancelled' then return done end
  return done and 'ok' or 'lease_lost'
end
finish.stream = h.priority and finish.limits.streams[tonumber(h.priority)] or finish.stream
if h.cancel_requested == '1' then
  cancel_running(finish, h, ARGV[11])
  return 'cancelled'
end
bury(finish, h, ARGV[10], ARGV[11], ARGV[15])
return 'ok'
