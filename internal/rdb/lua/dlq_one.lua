-- dlq_one: requeue or discard one dead-lettered task (see dlq_requeue_one and
-- dlq_discard_one in _lifecycle.lua).
--
-- KEYS[1] dlq: DLQ index
-- KEYS[2] events: event stream
-- KEYS[3] depth: depth counter
-- KEYS[4..13] bands: band streams p0..p9
-- KEYS[14] expiry: expiry ZSET
-- KEYS[15] retained: retained counts hash
-- ARGV[1] now int64: now (ms)
-- ARGV[2] action: "requeue" | "discard"
-- ARGV[3] id: task id
-- ARGV[4] task_prefix: task key prefix
-- ARGV[5] idem_prefix: idempotency key prefix
-- ARGV[6] events_max_len int64: events maxlen
-- ARGV[7] failed_ret_s int64: failed retention (s)
-- ARGV[8] idem_ttl_s int64: idempotency TTL (s)
-- ARGV[9] dlq_off: "1" = failed tasks may be requeued (the DLQ is off)
-- ARGV[10] deadline: new deadline of a requeued task (ms, "" = none)
-- ARGV[11] attempts_cap int: attempts history cap
--
-- Returns: string
-- "requeued" | "discarded" | "conflict" | "not_found".
--
--! include: dlq_requeue_one, dlq_discard_one

local streams = {}
for b = 0, 9 do streams[b] = KEYS[4 + b] end
local ctx = {now = tonumber(ARGV[1]), task_prefix = ARGV[4], idem_prefix = ARGV[5], dlq = KEYS[1],
  events = KEYS[2], events_maxlen = ARGV[6], depth = KEYS[3], streams = streams,
  retained = KEYS[15], retention = ARGV[7], idem_ttl = ARGV[8], allow_failed = ARGV[9] == '1', expiry = KEYS[14],
  expires_at = ARGV[10], attempts_cap = tonumber(ARGV[11])}
if ARGV[2] == 'requeue' then
  return dlq_requeue_one(ctx, ARGV[3])
end
return dlq_discard_one(ctx, ARGV[3])
