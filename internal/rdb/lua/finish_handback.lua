-- finish_handback: return a running task to its queue at the drain deadline, with
-- the same attempt, so a peer starts it at once. Fenced on status running +
-- attempt + worker. The old stream entry is acked (its data was trimmed at
-- claim) and a new one added; TASK_QUEUED {reason: handback}. The hand-back
-- is recorded in its own history field, h:<requeues>:<attempt>:<now>, so the
-- same attempt's final record does not overwrite it; the history is trimmed
-- to leave room for the attempts still to come. A call whose first run
-- landed (its record exists) answers ok.
--
-- KEYS[1] task: task hash
-- KEYS[2] lease: lease ZSET
-- KEYS[3] events: event stream
-- KEYS[4] band: band stream
-- KEYS[5] key_running: key-running hash
-- KEYS[6] held: held counter
-- KEYS[7] limited: limited flag
-- KEYS[8] wake: wake stream
-- KEYS[9..18] bands: band streams p0..p9
-- KEYS[19] key_freed: key slot release time (see key_freed)
-- ARGV[1] now int64: now (ms)
-- ARGV[2] id: task id
-- ARGV[3] attempt int: attempt
-- ARGV[4] worker_id: worker id
-- ARGV[5] group: consumer group
-- ARGV[6] events_max_len int64: events maxlen
-- ARGV[7] attempts_cap int: attempts history cap
-- ARGV[8] key_wait_prefix: key wait list prefix
-- ARGV[9] task_prefix: task key prefix
--
-- Returns: string
-- "ok" or "lease_lost".
--
--! include: emit, history_field, fence, trim_history_to, release_entry, release_key, wake_limited
--! include: limit_keys

local finish = {task_key = KEYS[1], lease = KEYS[2], stream = KEYS[4], now = tonumber(ARGV[1]),
  tid = ARGV[2], group = ARGV[5], attempts_cap = tonumber(ARGV[7])}
local h, seen = fence(KEYS[1], ARGV[3], ARGV[4])
local field = 'h:' .. ((h or seen).previous_attempts or '0') .. ':' .. ARGV[3] .. ':' .. ARGV[1]
if not h then
  if redis.call('HEXISTS', KEYS[1], field) == 1 then return 'ok' end
  return 'lease_lost'
end
local _, rec = history_field(h, h.worker_id, h.started_at or ARGV[1], ARGV[1], 'handback', 'Shutdown',
  'worker stopped before the task finished')
release_entry(finish, h)
local lk = limit_keys(5, 9, {freed = KEYS[19], keywait_prefix = ARGV[8], task_prefix = ARGV[9], now = ARGV[1]})
release_key(lk, h)
wake_limited(lk)
local sid = redis.call('XADD', KEYS[4], '*', 't', finish.tid, 'a', h.attempt)
redis.call('HSET', KEYS[1], 'status', 'queued', 'stream_id', sid, field, rec)
redis.call('HDEL', KEYS[1], 'worker_id', 'started_at', 'finished_at', 'claim')
trim_history_to(KEYS[1], finish.attempts_cap - (tonumber(h.max_attempts) - tonumber(h.attempt) + 1))
emit(KEYS[3], ARGV[6], 'TASK_QUEUED', finish.tid, h.type, h.attempt, finish.now, ARGV[4],
  cjson.encode({reason = 'handback'}))
return 'ok'
