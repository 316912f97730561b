-- promote: move due pending and retrying tasks into their band streams.
-- pending -> queued (TASK_QUEUED); retrying -> queued with attempt +1
-- (TASK_RETRIED); an overdue task expires instead (TASK_EXPIRED). Entries are
-- removed from the schedule in the same call, so any number of workers may
-- run this at once without enqueueing a task twice.
--
-- KEYS[1] schedule: schedule ZSET
-- KEYS[2] expiry: expiry ZSET
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
-- ARGV[7] outcomes: "1": the queue's events are outcomes (no TASK_QUEUED,
--   TASK_RETRIED)
--
-- Returns: {moved int, next_due int, examined int}
-- next_due is the earliest remaining due time (ms), or -1 when the
-- schedule is empty, and examined the entries looked at (a full call means
-- more may be due at once, even when stale entries made moved smaller).
--
--! include: expire_task, hget_map, enqueue_due

local now = tonumber(ARGV[1])
local streams = {}
for b = 0, 9 do streams[b] = KEYS[5 + b] end
local ctx = {now = now, task_prefix = ARGV[2], idem_prefix = ARGV[3], events = KEYS[3],
  events_maxlen = ARGV[5], retention = ARGV[6], streams = streams, schedule = KEYS[1],
  expiry = KEYS[2], depth = KEYS[4], retained = KEYS[15], outbox = KEYS[16], outcomes = ARGV[7] == '1'}

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
local moved = 0
for _, tid in ipairs(due) do
  redis.call('ZREM', KEYS[1], tid)
  local task_key = ctx.task_prefix .. tid
  local h = hget_map(task_key, {'status', 'priority', 'attempt', 'type', 'expires_at', 'idem_key', 'stream_id', 'ret', 'wf'})
  if h.status == 'pending' or h.status == 'retrying' then
    moved = moved + 1
    if h.expires_at and tonumber(h.expires_at) <= now then
      expire_task(ctx, tid, h)
    else
      enqueue_due(ctx, tid, h)
    end
  end
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {moved, nxt[2] and tonumber(nxt[2]) or -1, #due}
