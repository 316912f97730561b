-- cancelled: finalize a running attempt that returned an error after a cancel
-- request. Never retried. Fenced on status running + attempt + worker and on
-- the cancel_requested flag. In order: task hash (cancelled, retention TTL)
-- -> TASK_CANCELLED -> idempotency record (failed) -> XACK (the entry was
-- trimmed at claim), lease removal; depth -1; stats.
--
-- KEYS[1] task hash    KEYS[2] lease ZSET    KEYS[3] event stream
-- KEYS[4] band stream  KEYS[5] depth counter KEYS[6] stats hash (minute)
--
-- ARGV[1] now (ms)  ARGV[2] task id  ARGV[3] attempt  ARGV[4] worker id
-- ARGV[5] group     ARGV[6] idempotency key prefix    ARGV[7] events maxlen
-- ARGV[8] task retention (s)  ARGV[9] attempts history cap
-- ARGV[10] error message
--
-- Returns "ok", "lease_lost", or "not_requested" (no cancel request: the
-- caller must finalize as an ordinary failure instead).

local f = {task_key = KEYS[1], lease = KEYS[2], stream = KEYS[4], now = tonumber(ARGV[1]),
  tid = ARGV[2], group = ARGV[5], attempts_cap = tonumber(ARGV[9])}
local h = fence(KEYS[1], ARGV[3], ARGV[4])
if not h then return 'lease_lost' end
if h.cancel_requested ~= '1' then return 'not_requested' end

local dur = finish_attempt(f, h, 'cancelled', 'cancelled', 'Cancelled', ARGV[10], {'retryable', '0'})
redis.call('EXPIRE', KEYS[1], ARGV[8])
emit(KEYS[3], ARGV[7], 'TASK_CANCELLED', f.tid, h.type, h.attempt, f.now, ARGV[4],
  cjson.encode({reason = 'cancel requested while running'}))
idem_set(ARGV[6], h.idem_key, f.tid, 'failed', f.now)
release_entry(f, h)
redis.call('DECR', KEYS[5])
stat(KEYS[6], 'cancelled', 1)
stat(KEYS[6], 'run_ms_sum', dur)
return 'ok'
