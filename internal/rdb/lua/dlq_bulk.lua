-- dlq_bulk: requeue or discard the DLQ entries matching a filter, newest
-- first, examining at most N entries per call. Entries acted on leave the
-- index, so the cursor is the number of entries kept in place before the
-- next unexamined one.
--
-- KEYS[1] dlq: DLQ index
-- KEYS[2] events: event stream
-- KEYS[3] depth: depth counter
-- KEYS[4..13] bands: band streams p0..p9
-- KEYS[14] expiry: expiry ZSET
-- KEYS[15] retained: retained counts hash
-- ARGV[1] now int64: now (ms)
-- ARGV[2] action: "requeue" | "discard"
-- ARGV[3] offset int64: offset
-- ARGV[4] max int: max entries (<= 500)
-- ARGV[5] task_type: task type filter ("" = any)
-- ARGV[6] error_class: error class filter ("" = any)
-- ARGV[7] task_prefix: task key prefix
-- ARGV[8] idem_prefix: idempotency key prefix
-- ARGV[9] events_max_len int64: events maxlen
-- ARGV[10] failed_ret_s int64: failed retention (s)
-- ARGV[11] idem_ttl_s int64: idempotency TTL (s)
-- ARGV[12] attempts_cap int: attempts history cap
-- A requeued task starts afresh without a deadline (see dlq_requeue_one).
--
-- Returns: {matched int, processed int, next int}
-- next is the offset to go on from, or -1 when done.
--
--! include: hget_map, dlq_requeue_one, dlq_discard_one

local streams = {}
for b = 0, 9 do streams[b] = KEYS[4 + b] end
local ctx = {now = tonumber(ARGV[1]), task_prefix = ARGV[7], idem_prefix = ARGV[8], dlq = KEYS[1],
  events = KEYS[2], events_maxlen = ARGV[9], depth = KEYS[3], streams = streams,
  retained = KEYS[15], retention = ARGV[10], idem_ttl = ARGV[11], allow_failed = false, expiry = KEYS[14],
  expires_at = '', attempts_cap = tonumber(ARGV[12])}
local offset, max = tonumber(ARGV[3]), tonumber(ARGV[4])
local ids = redis.call('ZREVRANGE', KEYS[1], offset, offset + max - 1)
local matched, processed, kept = 0, 0, 0
for _, tid in ipairs(ids) do
  local h = hget_map(ctx.task_prefix .. tid, {'type', 'error_class'})
  local match = (ARGV[5] == '' or h.type == ARGV[5]) and (ARGV[6] == '' or h.error_class == ARGV[6])
  local done = false
  if match then
    matched = matched + 1
    local outcome
    if ARGV[2] == 'requeue' then outcome = dlq_requeue_one(ctx, tid) else outcome = dlq_discard_one(ctx, tid) end
    done = (outcome == 'requeued' or outcome == 'discarded')
    if done then processed = processed + 1 end
  end
  if not done and redis.call('ZSCORE', KEYS[1], tid) then kept = kept + 1 end
end
local nxt = offset + kept
if #ids < max then nxt = -1 end
return {matched, processed, nxt}
