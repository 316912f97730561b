-- succeed: finalize running attempts whose handlers returned, several tasks
-- of one queue per call. Each task is fenced on status running + attempt +
-- worker; a task whose fence fails is skipped (its worker lost the lease).
-- A task whose success by this worker and attempt is already recorded (a
-- call whose reply was lost, sent again) answers 2 and writes nothing.
-- Per task, in order: task hash (succeeded, history, retention TTL, the
-- error fields of an earlier attempt cleared) ->
-- TASK_SUCCEEDED -> result key -> idempotency record (completed). Then for
-- the whole call: XACK of the stream entries (claim trimmed their data),
-- lease removal, depth and stats.
--
-- KEYS[1] lease ZSET  KEYS[2] event stream  KEYS[3] depth counter
-- KEYS[4] stats hash (minute)  KEYS[5..14] band streams p0..p9
-- KEYS[15..18] key-running hash, held counter, limited flag, wake stream
-- then per task i: KEYS[19 + 2*(i-1)] task hash, KEYS[20 + 2*(i-1)] result key
--
-- ARGV[1] now (ms)  ARGV[2] worker id  ARGV[3] group
-- ARGV[4] idempotency key prefix  ARGV[5] events maxlen  ARGV[6] retention (s)
-- ARGV[7] result retention (s)  ARGV[8] attempts history cap  ARGV[9] tasks
-- ARGV[10] key wait list prefix  ARGV[11] task key prefix
-- then per task i (base = 12 + 4*(i-1)): task id, attempt, result JSON
-- ("" = none), "1" when the result was too large to keep
--
-- Returns one code per task: 1 finalized, 0 lease lost, 2 already finalized.

-- now_s goes into arguments as it came: turning a Lua number back into
-- text is a costly float formatting, once per task.
local now_s, worker, group = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(now_s)
local n = tonumber(ARGV[9])
local out, acks, leases, done = {}, {}, {}, 0
local acc = {}
local fields = {} -- each task's HSET arguments, refilled
local history_cap = tonumber(ARGV[8])
-- What a success needs of the task: fewer fields than fence_fields.
local need = {'status', 'attempt', 'worker_id', 'stream_id', 'type', 'idem_key', 'started_at',
  'cancel_requested', 'priority', 'previous_attempts', 'error_class', 'ckey'}
local lk = limit_keys(15, 5, 10)
local succeeded = {'succeeded'}
local h_buf = {}
for i = 1, n do
  local tk, rk = KEYS[19 + 2 * (i - 1)], KEYS[20 + 2 * (i - 1)]
  local ab = 12 + 4 * (i - 1)
  local tid, attempt, result, truncated = ARGV[ab], ARGV[ab + 1], ARGV[ab + 2], ARGV[ab + 3]
  local h, seen = fence(tk, attempt, worker, need, h_buf)
  if not h then
    out[i] = (seen.status == 'succeeded' and landed(tk, seen, attempt, worker, succeeded)) and 2 or 0
  else
    out[i] = 1
    done = done + 1
    local started = h.started_at or now_s
    local dur = math.max(0, now - tonumber(started))
    local dur_s = itoa(dur)
    local hf, hv = history_field(h, worker, started, now_s, 'succeeded', '', '', dur_s)
    fields[1], fields[2], fields[3], fields[4], fields[5], fields[6] = 'status', 'succeeded', 'finished_at', now_s, hf, hv
    local nf = 6
    if truncated == '1' then
      fields[7], fields[8] = 'result_truncated', '1'
      nf = 8
    elseif result ~= '' then
      fields[7], fields[8] = 'has_result', '1'
      nf = 8
    end
    redis.call('HSET', tk, unpack(fields, 1, nf))
    if h.error_class then -- left by an earlier attempt: this one succeeded
      redis.call('HDEL', tk, 'error_class', 'error_message', 'retryable', 'retry_delay_ms')
    end
    trim_history(tk, h, history_cap)
    redis.call('EXPIRE', tk, ARGV[6])
    local meta = '{"duration_ms":' .. dur_s .. (h.cancel_requested == '1' and ',"cancel_requested":true}' or '}')
    emit(KEYS[2], ARGV[5], 'TASK_SUCCEEDED', tid, h.type, h.attempt, now_s, worker, meta)
    if truncated ~= '1' and result ~= '' then
      redis.call('SET', rk, result, 'EX', ARGV[7])
    end
    idem_set(ARGV[4], h.idem_key, tid, 'completed', now)
    if h.stream_id and h.stream_id ~= '' then
      local ids = acks[h.priority] -- keyed by the priority's text
      if not ids then ids = {}; acks[h.priority] = ids end
      ids[#ids + 1] = h.stream_id
    end
    leases[#leases + 1] = tid
    release_key(lk, h)
    acc['run_ms_sum'] = (acc['run_ms_sum'] or 0) + dur
    local b = bucket_field('run_b', dur)
    acc[b] = (acc[b] or 0) + 1
  end
end
for band, ids in pairs(acks) do
  redis.call('XACK', KEYS[5 + tonumber(band)], group, unpack(ids))
end
if done > 0 then
  redis.call('ZREM', KEYS[1], unpack(leases))
  redis.call('DECRBY', KEYS[3], done)
  acc['succeeded'] = done
  stats_flush(KEYS[4], acc)
  wake_limited(lk)
end
return out
