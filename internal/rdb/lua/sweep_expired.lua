-- sweep_expired: expire tasks whose start deadline passed while pending,
-- queued or retrying (claim and promotion also catch them; this sweep makes
-- sure nothing waits past its deadline in an idle queue). Running and
-- finished tasks just leave the index.
--
-- KEYS[1] expiry: expiry ZSET
-- KEYS[2] schedule: schedule ZSET
-- KEYS[3] events: event stream
-- KEYS[4] depth: depth counter
-- KEYS[5..14] bands: band streams p0..p9
-- KEYS[15] retained: retained counts hash
-- KEYS[16] outbox: workflow outbox stream
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] task_prefix: task key prefix
-- ARGV[3] idem_prefix: idempotency key prefix
-- ARGV[4] max int: max tasks (<= 500)
-- ARGV[5] events_max_len int64: events maxlen
-- ARGV[6] failed_ret_s int64: failed retention (s)
--
-- Returns: {expired int, next_due int, examined int}
-- next_due is the earliest remaining deadline (ms) or -1, and examined the
-- entries looked at (a full call means more may be overdue at once).
--
--! include: expire_task, hget_map

local now = tonumber(ARGV[1])
local streams = {}
for b = 0, 9 do streams[b] = KEYS[5 + b] end
local ctx = {now = now, task_prefix = ARGV[2], idem_prefix = ARGV[3], events = KEYS[3],
  events_maxlen = ARGV[5], retention = ARGV[6], streams = streams, schedule = KEYS[2],
  expiry = KEYS[1], depth = KEYS[4], retained = KEYS[15], outbox = KEYS[16]}

local over = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
local n = 0
for _, tid in ipairs(over) do
  local h = hget_map(ctx.task_prefix .. tid, {'status', 'priority', 'attempt', 'type', 'idem_key', 'stream_id', 'ret', 'wf'})
  if h.status == 'pending' or h.status == 'queued' or h.status == 'retrying' then
    expire_task(ctx, tid, h)
    n = n + 1
  else
    redis.call('ZREM', KEYS[1], tid)
  end
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {n, nxt[2] and tonumber(nxt[2]) or -1, #over}
