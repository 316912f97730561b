-- dlq_one: requeue or discard one dead-lettered task (see dlq_requeue_one and
-- dlq_discard_one in _lifecycle.lua).
--
-- KEYS[1] DLQ index  KEYS[2] event stream  KEYS[3] depth counter
-- KEYS[4..13] band streams p0..p9  KEYS[14] expiry ZSET
-- KEYS[15] retained counts hash
-- ARGV[1] now (ms)  ARGV[2] "requeue" | "discard"  ARGV[3] task id
-- ARGV[4] task key prefix  ARGV[5] idempotency key prefix  ARGV[6] events maxlen
-- ARGV[7] failed retention (s)  ARGV[8] idempotency TTL (s)  ARGV[9] "1" = failed tasks
-- may be requeued (the DLQ is off)  ARGV[10] new deadline of a requeued task
-- (ms, "" = none)  ARGV[11] attempts history cap
--
-- Returns "requeued" | "discarded" | "conflict" | "not_found".
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
