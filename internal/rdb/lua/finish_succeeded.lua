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
-- KEYS[1] lease: lease ZSET
-- KEYS[2] events: event stream
-- KEYS[3] depth: depth counter
-- KEYS[4] stats: stats hash (minute)
-- KEYS[5..14] bands: band streams p0..p9
-- KEYS[15] key_running: key-running hash
-- KEYS[16] held: held counter
-- KEYS[17] limited: limited flag
-- KEYS[18] wake: wake stream
-- KEYS[19] retained: retained counts hash
-- KEYS[20..] task_keys []{task, result}: per task its hash and its result key
-- KEYS[20 + 2*n] outbox: workflow outbox stream (a node's end, see
--   wf_outbox)
-- KEYS[21 + 2*n] key_freed: key slot release time (see key_freed)
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] worker_id: worker id
-- ARGV[3] group: consumer group
-- ARGV[4] idem_prefix: idempotency key prefix
-- ARGV[5] events_max_len int64: events maxlen
-- ARGV[6] succeeded_ret_s int64: succeeded retention (s)
-- ARGV[7] result_ret_s int64: result retention (s)
-- ARGV[8] count int: tasks
-- ARGV[9] key_wait_prefix: key wait list prefix
-- ARGV[10] task_prefix: task key prefix
-- ARGV[11] claim: claim nonce every task's attempt must have been started
--   by ("" = not checked)
-- ARGV[12..] tasks []{id, attempt int, result bytes, truncated}: per task
--   its id, attempt, result JSON ("" = none), "1" when the result was too
--   large to keep
--
-- Returns: []int
-- one code per task: 1 finalized, 0 lease lost, 2 already finalized.
--
--! include: emit, stats_flush, retain, flush_retained, bucket_field, itoa, succeeded_by
--! include: release_key, wake_limited, limit_keys, wf_outbox, flat_map, event_age

-- now_s goes into arguments as it came: turning a Lua number back into
-- text is a costly float formatting, once per task.
local now_s, worker, group, claim = ARGV[1], ARGV[2], ARGV[3], ARGV[11]
local now = tonumber(now_s)
local n = tonumber(ARGV[8])
local result_ms = tonumber(ARGV[7]) * 1000
local out, acks, leases, done = {}, {}, {}, 0
local acc, kept = {}, {}
local starts = {} -- started_at text -> number: the tasks of one claim share it
-- The compact hash's argument list, refilled for every task (unpack with an
-- explicit length): a table built per task would be grown on the way.
local hset_args = {'status', 'succeeded', 'type', false, false, false, false, false, false, false, false, false}
local lk = limit_keys(15, 5, {freed = KEYS[21 + 2 * n], keywait_prefix = ARGV[9], task_prefix = ARGV[10], now = now_s})
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
  -- Read as a RESP3 map, the reply is the field table itself, filled by
  -- Redis: a flat RESP2 reply would be turned into one by Lua, field by
  -- field. Back to RESP2 at once: the helpers expect its replies.
  redis.setresp(3)
  local r = redis.call('HGETALL', task_key)
  redis.setresp(2)
  local h = r.map or flat_map(r)
  if h.status ~= 'running' or h.attempt ~= attempt or h.worker_id ~= worker
      or (claim ~= '' and h.claim ~= claim) then
    local again = h.status == nil or (h.status == 'succeeded' and succeeded_by(h, attempt, worker))
    out[i] = again and 2 or 0
  else
    out[i] = 1
    done = done + 1
    local started = h.started_at or now_s
    local started_n = starts[started]
    if not started_n then started_n = tonumber(started); starts[started] = started_n end
    local created = h.created_at and tonumber(h.created_at) or started_n
    local dur = math.max(0, now - started_n)
    local dur_s = itoa(dur)
    local id_n = tonumber(string.sub(tid, 1, 12), 16)
    local off = created - (id_n or created) -- nearly always 0
    local packed = h.attempt .. ',' .. h.priority .. ',' .. (h.max_attempts or '1') .. ',' ..
      (h.timeout_ms or '0') .. ',' .. (off >= 0 and itoa(off) or string.format('%d', off)) .. ',' ..
      itoa(math.max(0, started_n - created)) .. ',' .. dur_s
    local fields, nf = hset_args, 4
    fields[4] = h.type
    if #packed + 1 + #worker <= 64 then
      packed = packed .. ',' .. worker
    else
      fields[5], fields[6] = 'worker_id', worker
      nf = 6
    end
    fields[nf + 1], fields[nf + 2] = 'done', packed
    nf = nf + 2
    local ttype, priority, stream_id = h.type, h.priority, h.stream_id
    if h.keep == '1' and h.payload then
      fields[nf + 1], fields[nf + 2] = 'payload', h.payload
      nf = nf + 2
    end
    -- The rest of the hash is copied but for the dropped fields. Those of
    -- every running task leave h first: they are in locals or in done by
    -- now, and walking a table costs a C call per field.
    h.status, h.type, h.attempt, h.priority, h.max_attempts, h.timeout_ms = nil, nil, nil, nil, nil, nil
    h.created_at, h.started_at, h.worker_id, h.stream_id, h.claim, h.payload = nil, nil, nil, nil, nil, nil
    for field, value in pairs(h) do
      if not drop[field] then
        fields[nf + 1], fields[nf + 2] = field, value
        nf = nf + 2
      end
    end
    h[true] = true -- h holds every field the task kept (see retain)
    if truncated == '1' then
      fields[nf + 1], fields[nf + 2] = 'result_truncated', '1'
      nf = nf + 2
    elseif result ~= '' then
      fields[nf + 1], fields[nf + 2] = 'has_result', '1'
      nf = nf + 2
    end
    redis.call('DEL', task_key)
    redis.call('HSET', task_key, unpack(fields, 1, nf))
    local ms = retain(retention, task_key, 'succeeded', ARGV[6], h, kept)
    local meta = '{"duration_ms":' .. dur_s .. (h.cancel_requested == '1' and ',"cancel_requested":true}' or '}')
    -- The event's ts from the id's time read above (event_ts would read it
    -- again).
    local ts = id_n and event_age(id_n, now_s)
    emit(KEYS[2], ARGV[5], 'TASK_SUCCEEDED', tid, ttype, attempt, now_s, worker, meta, ts)
    if h.wf then wf_outbox(KEYS[20 + 2 * n], h.wf, 'succeeded', truncated ~= '1' and result or '', '') end
    if truncated ~= '1' and result ~= '' and ms > 0 then
      -- A result outliving its task could never be read.
      redis.call('SET', result_key, result, 'PX', math.min(result_ms, ms))
    end
    if stream_id and stream_id ~= '' then
      local ids = acks[priority] -- keyed by the priority's text
      if not ids then ids = {}; acks[priority] = ids end
      ids[#ids + 1] = stream_id
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
