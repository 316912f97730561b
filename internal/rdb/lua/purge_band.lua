-- purge_band: cancel the ready (queued, undelivered) tasks of one band, at
-- most N entries examined per call, resuming after a stream id.
--
-- KEYS[1] band: band stream
-- KEYS[2] expiry: expiry ZSET
-- KEYS[3] events: event stream
-- KEYS[4] depth: depth counter
-- KEYS[5] retained: retained counts hash
-- KEYS[6] outbox: workflow outbox stream
-- ARGV[1] now int64: now (ms)
-- ARGV[2] start: start after this stream id ("-" = beginning)
-- ARGV[3] max int: max entries
-- ARGV[4] task_prefix: task key prefix
-- ARGV[5] idem_prefix: idempotency key prefix
-- ARGV[6] events_max_len int64: events maxlen
-- ARGV[7] failed_ret_s int64: failed retention (s)
--
-- Returns: {cancelled int, last string}
-- {cancelled, last id examined or ""}: "" means the band is done.
--
--! include: emit, retain, keep_body, hget_map, wf_outbox

local now = tonumber(ARGV[1])
local start = ARGV[2] == '-' and '-' or ('(' .. ARGV[2])
local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', tonumber(ARGV[3]))
local n, last = 0, ''
local retention = {retained = KEYS[5], idem_prefix = ARGV[5], now = now}
for _, e in ipairs(entries) do
  local eid, tid = e[1], e[2][2]
  last = eid
  local task_key = ARGV[4] .. tid
  local h = hget_map(task_key, {'status', 'stream_id', 'type', 'attempt', 'idem_key', 'ret', 'wf'})
  if h.status == 'queued' and h.stream_id == eid then
    keep_body(task_key, KEYS[1], eid, e[2])
    redis.call('XDEL', KEYS[1], eid)
    redis.call('HDEL', task_key, 'stream_id')
    redis.call('ZREM', KEYS[2], tid)
    redis.call('HSET', task_key, 'status', 'cancelled', 'finished_at', now)
    redis.call('DECR', KEYS[4])
    emit(KEYS[3], ARGV[6], 'TASK_CANCELLED', tid, h.type, h.attempt, now, '', cjson.encode({reason = 'queue purged'}))
    wf_outbox(KEYS[6], h.wf, 'cancelled', '', '')
    retain(retention, task_key, 'cancelled', ARGV[7], h)
    n = n + 1
  end
end
if #entries < tonumber(ARGV[3]) then last = '' end
return {n, last}
