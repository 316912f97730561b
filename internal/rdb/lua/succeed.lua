-- succeed: finalize a running attempt whose handler returned a result.
-- Fenced on status running + attempt + worker. In order: task hash
-- (succeeded, retention TTL) -> TASK_SUCCEEDED -> result key -> idempotency
-- record (completed) -> XACK+XDEL, lease removal; depth -1; stats.
--
-- KEYS[1] task hash    KEYS[2] lease ZSET    KEYS[3] event stream
-- KEYS[4] band stream  KEYS[5] depth counter KEYS[6] stats hash (minute)
-- KEYS[7] result key
--
-- ARGV[1] now (ms)  ARGV[2] task id  ARGV[3] attempt  ARGV[4] worker id
-- ARGV[5] group     ARGV[6] idempotency key prefix    ARGV[7] events maxlen
-- ARGV[8] task retention (s)  ARGV[9] attempts history cap
-- ARGV[10] result JSON ("" = none)  ARGV[11] "1" when the result was too large
-- ARGV[12] result retention (s)
--
-- Returns "ok" or "lease_lost".

local f = {task_key = KEYS[1], lease = KEYS[2], stream = KEYS[4], now = tonumber(ARGV[1]),
  tid = ARGV[2], group = ARGV[5], attempts_cap = tonumber(ARGV[9])}
local h = fence(KEYS[1], ARGV[3], ARGV[4])
if not h then return 'lease_lost' end

local dur = finish_attempt(f, h, 'succeeded', '', '')
redis.call('HSET', KEYS[1], 'status', 'succeeded')
redis.call('EXPIRE', KEYS[1], ARGV[8])
local meta = {duration_ms = dur}
if h.cancel_requested == '1' then meta.cancel_requested = true end
emit(KEYS[3], ARGV[7], 'TASK_SUCCEEDED', f.tid, h.type, h.attempt, f.now, ARGV[4], cjson.encode(meta))
if ARGV[11] == '1' then
  redis.call('HSET', KEYS[1], 'result_truncated', '1')
elseif ARGV[10] ~= '' then
  redis.call('SET', KEYS[7], ARGV[10], 'EX', ARGV[12])
  redis.call('HSET', KEYS[1], 'has_result', '1')
end
idem_set(ARGV[6], h.idem_key, f.tid, 'completed', f.now)
release_entry(f, h)
redis.call('DECR', KEYS[5])
stat(KEYS[6], 'succeeded', 1)
stat(KEYS[6], 'run_ms_sum', dur)
stat(KEYS[6], 'run_b' .. log2_bucket(dur), 1)
return 'ok'
