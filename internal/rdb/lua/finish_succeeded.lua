-- finish_succeeded: finalize running attempts whose handlers returned, several tasks
-- of one queue per call. Each task is fenced on status running + attempt +
-- worker (+ claim nonce, when the call gives one: a remote worker's lease
-- token names the claim that started its attempt); a task whose fence fails
-- is skipped (its worker lost the lease).
-- A task whose success by this worker and attempt is already recorded (a
-- call whose reply was lost, sent again) answers 2 and writes nothing; so
-- does a task already gone (kept for 0 s).
-- Per task, in order: task hash (rebuilt compact, see below; retention
-- starts) -> TASK_SUCCEEDED -> result key (a replay of its idempotency
-- key now answers it: the record's state is the task's status). Then for
-- the whole call: XACK of the stream entries (claim
-- trimmed their data), lease removal, depth, stats and retained counts.
--
-- The succeeded hash keeps what replays, the dashboard and operators read:
-- status, type and one packed field, done = "attempt,priority,
-- max_attempts,timeout_ms,created-id,started-created,finished-started
-- [,worker id]" with times as offsets in ms (id: the time in the task id,
-- nearly always created_at itself) and the worker id in its own field when
-- done would pass 64 bytes; plus the optional fields the task has (metadata included:
-- it ties the task to its schedule, its trace and the caller's tags). The payload
-- goes unless the task was submitted with keep_payload; this attempt's
-- record is done itself, earlier attempts' records stay. The hash is
-- deleted and written anew: a hash that grew into a hashtable (a payload
-- over hash-max-listpack-value) never turns back into a listpack.
--
-- KEYS[1] lease ZSET  KEYS[2] event stream  KEYS[3] depth counter
-- KEYS[4] stats hash (minute)  KEYS[5..14] band streams p0..p9
-- KEYS[15..18] key-running hash, held counter, limited flag, wake stream
-- KEYS[19] retained counts hash
-- then per task i: KEYS[20 + 2*(i-1)] task hash, KEYS[21 + 2*(i-1)] result key
-- then KEYS[20 + 2*n] workflow outbox stream (a node's end, see wf_outbox)
--
-- ARGV[1] now (ms)  ARGV[2] worker id  ARGV[3] group
-- ARGV[4] idempotency key prefix  ARGV[5] events maxlen
-- ARGV[6] succeeded retention (s)  ARGV[7] result retention (s)
-- ARGV[8] tasks  ARGV[9] key wait list prefix  ARGV[10] task key prefix
-- ARGV[11] claim nonce every task's attempt must have been started by
--          ("" = not checked)
-- then per task i (base = 12 + 4*(i-1)): task id, attempt, result JSON
-- ("" = none), "1" when the result was too large to keep
--
-- Returns one code per task: 1 finalized, 0 lease lost, 2 already finalized.
--
--! include: emit, stats_flush, retain, flush_retained, bucket_field, itoa, succeeded_by
--! include: release_key, wake_limited, limit_keys, wf_outbox

-- now_s goes into arguments as it came: turning a Lua number back into
-- text is a costly float formatting, once per task.
local now_s, worker, group, claim = ARGV[1], ARGV[2], ARGV[3], ARGV[11]
local now = tonumber(now_s)
local n = tonumber(ARGV[8])
local result_ms = tonumber(ARGV[7]) * 1000
local out, acks, leases, done = {}, {}, {}, 0
local h, prev = {}, {}
h[true] = true -- h holds every field of the task (see retain)
local acc, kept = {}, {}
local lk = limit_keys(15, 5, 9)
local retention = {retained = KEYS[19], idem_prefix = ARGV[4], now = now}
-- Fields the compact hash drops: folded into done, or not needed once the
-- task succeeded. Everything else (optional fields, earlier attempts'
-- records) is kept.
local drop = {status = true, type = true, attempt = true, priority = true, max_attempts = true,
  timeout_ms = true, created_at = true, started_at = true, finished_at = true, worker_id = true,
  stream_id = true, claim = true, error_class = true, error_message = true,
  retryable = true, retry_delay_ms = true, payload = true, held = true, deps = true, pq = true}
for i = 1, n do
  local task_key, result_key = KEYS[20 + 2 * (i - 1)], KEYS[21 + 2 * (i - 1)]
  local ab = 12 + 4 * (i - 1)
  local tid, attempt, result, truncated = ARGV[ab], ARGV[ab + 1], ARGV[ab + 2], ARGV[ab + 3]
  -- One table for every task, cleared of the previous task's fields: a
  -- fresh one would be rehashed four times on the way to a task's fields.
  for j = 1, #prev, 2 do h[prev[j]] = nil end
  local flat = redis.call('HGETALL', task_key)
  prev = flat
  for j = 1, #flat, 2 do h[flat[j]] = flat[j + 1] end
  if h.status ~= 'running' or h.attempt ~= attempt or h.worker_id ~= worker
      or (claim ~= '' and h.claim ~= claim) then
    local again = h.status == nil or (h.status == 'succeeded' and succeeded_by(h, attempt, worker))
    out[i] = again and 2 or 0
  else
    out[i] = 1
    done = done + 1
    local started = h.started_at or now_s
    local started_n = tonumber(started)
    local created = h.created_at and tonumber(h.created_at) or started_n
    local dur = math.max(0, now - started_n)
    local dur_s = itoa(dur)
    local id_ms = tonumber(string.sub(tid, 1, 12), 16) or created
    local off = created - id_ms -- nearly always 0
    local packed = h.attempt .. ',' .. h.priority .. ',' .. (h.max_attempts or '1') .. ',' ..
      (h.timeout_ms or '0') .. ',' .. (off >= 0 and itoa(off) or string.format('%d', off)) .. ',' ..
      itoa(math.max(0, started_n - created)) .. ',' .. dur_s
    local fields = {'status', 'succeeded', 'type', h.type}
    if #packed + 1 + #worker <= 64 then
      packed = packed .. ',' .. worker
    else
      fields[#fields + 1] = 'worker_id'; fields[#fields + 1] = worker
    end
    fields[#fields + 1] = 'done'; fields[#fields + 1] = packed
    local keep = h.keep == '1'
    for j = 1, #flat, 2 do
      local field = flat[j]
      if not drop[field] or (keep and field == 'payload') then
        fields[#fields + 1] = field; fields[#fields + 1] = flat[j + 1]
      end
    end
    if truncated == '1' then
      fields[#fields + 1] = 'result_truncated'; fields[#fields + 1] = '1'
    elseif result ~= '' then
      fields[#fields + 1] = 'has_result'; fields[#fields + 1] = '1'
    end
    redis.call('DEL', task_key)
    redis.call('HSET', task_key, unpack(fields))
    local ms = retain(retention, task_key, 'succeeded', ARGV[6], h, kept)
    local meta = '{"duration_ms":' .. dur_s .. (h.cancel_requested == '1' and ',"cancel_requested":true}' or '}')
    emit(KEYS[2], ARGV[5], 'TASK_SUCCEEDED', tid, h.type, h.attempt, now_s, worker, meta)
    if h.wf then wf_outbox(KEYS[#KEYS], h.wf, 'succeeded', truncated ~= '1' and result or '', '') end
    if truncated ~= '1' and result ~= '' and ms > 0 then
      -- A result outliving its task could never be read.
      redis.call('SET', result_key, result, 'PX', math.min(result_ms, ms))
    end
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
  flush_retained(retention, kept)
  wake_limited(lk)
end
return out
