-- _lib: helpers prepended to the scripts that use them (never run on its own;
-- rdb.go picks each top-level declaration a script needs, and what those need).
-- They take every key or key prefix as an argument: no key name is built here
-- beyond prefix .. id, with prefixes that carry the queue's hash tag.

-- emit's argument list, refilled on every call; built at its full size, since
-- a table grown one slot at a time is rehashed four times on the way to 14.
local ev_buf = {'type', false, 'task_id', false, 'task_type', false, 'attempt', false,
  'ts', false, 'worker_id', false, 'meta', false}

local ts_small = {}
local ts_now_s, ts_now = nil, nil -- the last now event_ts turned into a number

-- event_ts is an event's ts field: for a task's event, the ms since the time
-- in its id (its creation), a small integer Redis stores in one to four
-- bytes where an epoch-ms time takes nine; else now itself. Readers tell
-- them apart by size: an offset is under 1e11 ms (three years).
local function event_ts(tid, now)
  local id_ms = tid ~= '' and tonumber(string.sub(tid, 1, 12), 16)
  if not id_ms then return now end
  -- A call emits many events with the same now: convert it once (strtod
  -- is a thousand instructions for an epoch-ms time).
  if now ~= ts_now_s then ts_now_s, ts_now = now, tonumber(now) end
  local d = ts_now - id_ms
  if d >= 0 and d < 4096 then
    local s = ts_small[d]
    if not s then s = tostring(d); ts_small[d] = s end
    return s
  end
  return string.format('%d', d)
end

-- emit appends one lifecycle event to a queue's event stream. Every entry
-- has the same seven fields in the same order (worker_id and meta empty
-- when there are none): Redis then stores the field names once per stream
-- node instead of once per entry. The fields go through one reused table:
-- hot scripts emit once per task.
-- ts, when given, is the entry's ts field as event_ts would compute it (a
-- caller that has it spares the script the hex and number conversions).
local function emit(events_key, maxlen, etype, tid, ttype, attempt, now, worker, meta, ts)
  local ev = ev_buf
  ev[2], ev[4], ev[6], ev[8] = etype, tid, ttype, attempt or 0
  ev[10], ev[12], ev[14] = ts or event_ts(tid, now), worker or '', meta or ''
  return redis.call('XADD', events_key, 'MAXLEN', '~', maxlen, '*', unpack(ev, 1, 14))
end

-- idem_owner returns the task id an idempotency record names. A record
-- is the task id itself: its state (in progress, or done and replayed) is
-- the task's status, read from the task hash, so no transition rewrites the
-- record. A record of an earlier layout (JSON {task_id, state, updated_at,
-- fingerprint}) is read too; its fingerprint is returned for a task hash
-- that no longer holds one.
local function idem_owner(raw)
  if string.byte(raw, 1) ~= 123 then return raw, nil end -- not '{'
  local ok, rec = pcall(cjson.decode, raw)
  if not ok or type(rec) ~= 'table' or type(rec.task_id) ~= 'string' then return nil, nil end
  return rec.task_id, rec.fingerprint
end

local wj_key, wj_val = nil, nil

-- worker_json is cjson.encode(worker), remembered for the last worker: a
-- batch finalizes many tasks of the same one.
local function worker_json(worker)
  if worker ~= wj_key then wj_key, wj_val = worker, cjson.encode(worker) end
  return wj_val
end

-- history_field returns the hash field and JSON of one finished attempt.
-- Each attempt has its own field, h:<requeues>:<attempt>, so recording one
-- is a plain HSET (no read, no decode); the oldest beyond the cap is deleted.
-- started and finished are epoch-ms strings (numbers also work, but each
-- costs a float-to-text conversion); dur, the duration in ms as text, is
-- computed when not given.
local function history_field(h, worker, started, finished, outcome, err_class, err_msg, dur)
  dur = dur or math.max(0, tonumber(finished) - tonumber(started))
  local prev = h.previous_attempts or '0'
  local rec = '{"attempt":' .. h.attempt .. ',"worker_id":' .. worker_json(worker or '') ..
    ',"started_at":' .. started .. ',"finished_at":' .. finished .. ',"duration_ms":' ..
    dur .. ',"outcome":"' .. outcome .. '"'
  if err_class ~= '' then
    rec = rec .. ',"error_class":' .. cjson.encode(err_class) .. ',"error_message":' .. cjson.encode(err_msg)
  end
  return 'h:' .. prev .. ':' .. h.attempt, rec .. '}'
end

-- trim_history drops the attempt record that fell out of the capped window.
local function trim_history(task_key, h, cap)
  if h.attempt == '1' then return end -- the first attempt: nothing to drop
  local old = tonumber(h.attempt) - cap
  if old >= 1 then
    redis.call('HDEL', task_key, 'h:' .. (h.previous_attempts or '0') .. ':' .. old)
  end
end

-- stat adds n to a field of a per-minute stats hash, kept two hours: the
-- TTL is set by whichever write creates the field, so most calls are one
-- HINCRBY.
local function stat(stats_key, field, n)
  if stats_key == nil or stats_key == '' or n == 0 then return end
  if redis.call('HINCRBY', stats_key, field, n) == n then
    redis.call('EXPIRE', stats_key, 7200)
  end
end

-- stats_flush writes counters gathered in a table (field -> n).
local function stats_flush(stats_key, acc)
  for field, n in pairs(acc) do stat(stats_key, field, n) end
end

local rf_names = {}

-- retained_field names the retained-counts field of a task that ended with
-- status and is kept until end_ms: status:<end of its bucket, epoch s>,
-- with buckets of gran ms (see retention_gran).
local function retained_field(status, end_ms, gran)
  -- Remembered per status and bucket: a batch's tasks share a few buckets,
  -- and formatting one costs a sprintf.
  local bucket = math.ceil(end_ms / gran) * gran / 1000
  local t = rf_names[status]
  if not t then t = {}; rf_names[status] = t end
  local name = t[bucket]
  if not name then name = status .. ':' .. string.format('%d', bucket); t[bucket] = name end
  return name
end

-- retention_gran is the bucket size for a retention of ms: a minute, or an
-- hour past 6 h, so the retained hash holds a few hundred fields per status
-- however many tasks it counts.
local function retention_gran(ms)
  return ms <= 21600000 and 60000 or 3600000
end

-- ended_window is how long after its creation a task deleted at once (a
-- retention of 0) leaves a marker: an ingest call sent again after its
-- reply was lost (go-redis resends; so does the client, within
-- rdb.IngestResendWindow) must find that its task was created, even when the
-- task already ran and was deleted. A key's record does this for a keyed
-- task, which is kept as long as its record. Settling (ingest.lua) keeps
-- its "never created" marker as long.
local ended_window = 60000

-- mark_ended leaves the marker of a task key deleted at once: the task key
-- with ':ended' appended (keys.go TaskEnded, same slot), living until the
-- window after the task's creation (the time in its id) ends.
local function mark_ended(tk, now)
  local id_ms = tonumber(string.sub(tk, -32, -21), 16)
  -- (at most the window: an id's time may run ahead of now)
  local left = id_ms and math.min(ended_window, id_ms + ended_window - tonumber(now)) or ended_window
  if left > 0 then
    redis.call('SET', tk .. ':ended', '1', 'PX', math.floor(left))
  end
end

local ret_ms = {}

-- retention_ms is a retention in seconds (text) as ms, remembered: most
-- tasks of a call have the same one.
local function retention_ms(s)
  local ms = ret_ms[s]
  if not ms then ms = tonumber(s) * 1000; ret_ms[s] = ms end
  return ms
end

-- retain starts the retention of a task that just ended with status: its
-- own retention (field ret, seconds, given at submission) or else
-- default_s. A task with an idempotency key is kept at least as long as its
-- record, so that a replay still finds it. A retention of 0 deletes the
-- task at once. A kept task is counted in the queue's retained hash under
-- its status and retention bucket; acc, when given, gathers the counts for
-- one HINCRBY per field at the end of a batch (see flush_retained).
-- r: retained (hash key), idem_prefix, now (ms). h holds ret and idem_key
-- when the caller read them (nil: read here). Returns the retention in ms,
-- 0 when the task was deleted.
local function retain(r, tk, status, default_s, h, acc)
  local ret, ikey
  if h then
    ret, ikey = h.ret, h.idem_key
  else
    local v = redis.call('HMGET', tk, 'ret', 'idem_key')
    ret, ikey = v[1], v[2]
  end
  local ms = retention_ms(ret or default_s)
  if ikey and ikey ~= '' then
    local left = redis.call('PTTL', r.idem_prefix .. ikey)
    if left > ms then ms = left end
  end
  if ms <= 0 then
    redis.call('DEL', tk)
    if not (ikey and ikey ~= '') then mark_ended(tk, r.now) end
    return 0
  end
  redis.call('PEXPIRE', tk, ms)
  local field = retained_field(status, tonumber(r.now) + ms, retention_gran(ms))
  if acc then
    acc[field] = (acc[field] or 0) + 1
  else
    redis.call('HINCRBY', r.retained, field, 1)
  end
  return ms
end

-- flush_retained writes the counts retain gathered in acc.
local function flush_retained(r, acc)
  for field, n in pairs(acc) do redis.call('HINCRBY', r.retained, field, n) end
end

-- entry_body returns the payload and metadata a band stream entry carries
-- (fields t, a, p[, m]: ingest puts a queued task's payload and metadata
-- there, so that its hash stays a listpack), or nil when it carries none.
-- ef is the entry's field list.
local function entry_body(ef)
  if not ef or ef[5] ~= 'p' then return nil end
  if ef[7] == 'm' then return ef[6], ef[8] end
  return ef[6], nil
end

-- keep_body moves the payload and metadata of a queued task's band stream
-- entry into its hash, before the entry goes away (claim, cancel, expiry,
-- purge, hold). ef is the entry's field list when the caller has it; else
-- the entry is read.
local function keep_body(tk, stream, sid, ef)
  if not ef then
    if not sid or sid == '' then return end
    local e = redis.call('XRANGE', stream, sid, sid)
    ef = e[1] and e[1][2]
  end
  local p, m = entry_body(ef)
  if p and m then
    redis.call('HSET', tk, 'payload', p, 'metadata', m)
  elseif p then
    redis.call('HSET', tk, 'payload', p)
  end
end

-- expire_task moves a not-yet-started task to expired: removes its stream or
-- schedule entry and index entries, decrements depth, emits TASK_EXPIRED
-- and starts retention (a replay of its idempotency key now answers it as
-- failed: the record's state is the task's status).
-- streams is a table band -> stream key; ef, when given, is the fields of
-- the task's stream entry (see keep_body).
local function expire_task(c, tid, h, ef)
  local tk = c.task_prefix .. tid
  redis.call('HSET', tk, 'status', 'expired', 'finished_at', c.now)
  if h.stream_id and h.stream_id ~= '' then
    local stream = c.streams[tonumber(h.priority)]
    keep_body(tk, stream, h.stream_id, ef)
    redis.call('XDEL', stream, h.stream_id)
    redis.call('HDEL', tk, 'stream_id')
  end
  redis.call('ZREM', c.schedule, tid)
  redis.call('ZREM', c.expiry, tid)
  redis.call('DECR', c.depth)
  emit(c.events, c.events_maxlen, 'TASK_EXPIRED', tid, h.type, h.attempt, c.now, '', '')
  retain(c, tk, 'expired', c.retention, h)
end

-- later_ms reports whether epoch-ms text a is after b, without turning
-- either into a Lua number (strtod): for digits without leading zeros the
-- longer is larger, and equal lengths compare as text.
local function later_ms(a, b)
  local la, lb = #a, #b
  if la ~= lb then return la > lb end
  return a > b
end

-- int_ge reports whether integer text a is at least b, without turning
-- either into a Lua number (strtod): for digits without leading zeros the
-- longer is larger, and equal lengths compare as text. A negative a (a
-- counter that drifted below zero) is less than any b.
local function int_ge(a, b)
  if string.byte(a, 1) == 45 then return false end -- '-'
  local la, lb = #a, #b
  if la ~= lb then return la > lb end
  return a >= b
end

-- after_id returns the smallest stream id after id ("<ms>-<seq>"): the
-- XTRIM MINID that removes id and everything before it; nil for anything
-- that is not a full stream id.
local function after_id(id)
  local ms, seq = string.match(tostring(id), '^(%d+)-(%d+)$')
  if not ms then return nil end
  return ms .. '-' .. (tonumber(seq) + 1)
end

-- hget_into reads the named fields of a hash into m (absent fields become
-- nil). A hot loop passes one table it refills from task to task: once the
-- table has a slot for every field, refilling allocates nothing, where a
-- fresh table is rehashed four times on the way to 14 fields. Whatever m
-- held before is gone.
local function hget_into(m, key, fields)
  local vals = redis.call('HMGET', key, unpack(fields))
  for i = 1, #fields do
    local v = vals[i]
    if v then m[fields[i]] = v else m[fields[i]] = nil end
  end
  return m
end

-- hgetall_into is hget_into by HGETALL: fields are cleared, then every
-- field of the hash is set. A small hash (a listpack) answers HGETALL in
-- one pass, where HMGET looks up each name from its start; fields the hash
-- has beyond the named ones are left in m too.
local function hgetall_into(m, key, fields)
  for i = 1, #fields do m[fields[i]] = nil end
  local flat = redis.call('HGETALL', key)
  for i = 1, #flat, 2 do m[flat[i]] = flat[i + 1] end
  return m
end

-- hget_map reads the named fields of a hash into a new table.
local function hget_map(key, fields)
  return hget_into({}, key, fields)
end

-- log2_bucket names the power-of-two latency bucket of ms for stats fields.
local function log2_bucket(ms)
  if ms < 1 then return 0 end
  return math.floor(math.log(ms) / math.log(2)) + 1
end

local bucket_names = {}

-- bucket_field is prefix .. log2_bucket(ms), remembered: building it costs a
-- number-to-text conversion, once per task otherwise.
local function bucket_field(prefix, ms)
  local k = log2_bucket(ms)
  local t = bucket_names[prefix]
  if not t then t = {}; bucket_names[prefix] = t end
  local name = t[k]
  if not name then name = prefix .. k; t[k] = name end
  return name
end

local small_ints = {}

-- itoa formats a non-negative integer, remembering the small ones (most
-- durations of short handlers), since Lua formats numbers with sprintf.
local function itoa(n)
  if n < 4096 then
    local s = small_ints[n]
    if not s then s = tostring(n); small_ints[n] = s end
    return s
  end
  return tostring(n)
end

local fence_fields = {'status', 'attempt', 'worker_id', 'stream_id', 'type', 'idem_key',
  'started_at', 'max_attempts', 'cancel_requested', 'priority', 'expires_at', 'previous_attempts', 'ckey', 'ret'}

local fence_h = {} -- reused by every fence call: see hget_into

-- fence returns the task's fields when it is still running under this worker
-- and attempt, or nil: a worker that lost its lease writes nothing. The
-- table is valid until the next fence call. A hot caller may read fewer
-- fields (fields) into a table of its own (into). claim, when given and not
-- "", must also be the nonce of the claim that started the attempt (a
-- remote worker's lease token names it; a Go worker passes none).
local function fence(task_key, attempt, worker, fields, into, claim)
  local h = hget_into(into or fence_h, task_key, fields or fence_fields)
  if h.status ~= 'running' or h.attempt ~= attempt or h.worker_id ~= worker then
    return nil, h
  end
  if claim and claim ~= '' and redis.call('HGET', task_key, 'claim') ~= claim then
    return nil, h
  end
  return h
end

-- landed tells whether this attempt's finalize already happened: the
-- attempt's history record names this worker and one of outcomes. A
-- finalize whose reply was lost is sent again with the same arguments (by
-- the client library or by the worker's retry) and must then answer as the
-- first call did, not lease_lost. h is what fence read (its
-- previous_attempts). Returns the recorded outcome, or nil.
local function landed(task_key, h, attempt, worker, outcomes)
  local rec = redis.call('HGET', task_key, 'h:' .. (h.previous_attempts or '0') .. ':' .. attempt)
  if not rec or not string.find(rec, '"worker_id":' .. worker_json(worker) .. ',', 1, true) then
    return nil
  end
  for _, o in ipairs(outcomes) do
    if string.find(rec, '"outcome":"' .. o .. '"', 1, true) then return o end
  end
  return nil
end

-- succeeded_by tells whether a succeeded task's compact record (see
-- finish_succeeded.lua) names this attempt and worker: a success sent again after
-- its reply was lost. h is the task's fields.
local function succeeded_by(h, attempt, worker)
  local d = h.done
  if not d or string.match(d, '^(%d+),') ~= attempt then return false end
  local w = h.worker_id or string.match(d, '^[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,(.*)$')
  return w == worker
end

-- trim_history_to keeps the newest keep attempt records of a task hash (all
-- generations, handback records included) and deletes the rest. It reads
-- every field name, so only the rare transitions use it (requeue,
-- handback); a finalize drops at most one record with trim_history.
local function trim_history_to(task_key, keep)
  local recs = {}
  for _, f in ipairs(redis.call('HKEYS', task_key)) do
    local p, a, sub = string.match(f, '^h:(%d+):(%d+):?(%d*)$')
    if p then
      -- A handback record (h:p:a:<ms>) comes before its attempt's final one.
      recs[#recs + 1] = {tonumber(p), tonumber(a), sub == '' and math.huge or tonumber(sub), f}
    end
  end
  local over = #recs - math.max(0, keep)
  if over <= 0 then return end
  table.sort(recs, function(x, y)
    if x[1] ~= y[1] then return x[1] < y[1] end
    if x[2] ~= y[2] then return x[2] < y[2] end
    return x[3] < y[3]
  end)
  local del = {}
  for i = 1, over do del[i] = recs[i][4] end
  redis.call('HDEL', task_key, unpack(del))
end

local claimed_fields = {'status', 'attempt', 'worker_id', 'claim', 'type', 'payload', 'timeout_ms',
  'max_attempts', 'idem_key', 'created_at', 'cancel_requested', 'metadata', 'priority'}

-- claimed_tuple is one started task as claim and reclaim return it.
local function claimed_tuple(tid, h, attempt)
  return {tid, attempt, h.type, h.payload or '{}', h.timeout_ms, h.max_attempts,
    h.idem_key or '', h.created_at or '0', h.cancel_requested or '0', h.metadata or '{}', h.priority}
end

-- replayed returns the tasks an earlier run of this very call started: a
-- claim or reclaim whose reply was lost is sent again with the same
-- arguments, and the tasks it started (lease until lease_s, this worker,
-- this call's nonce) must reach the worker instead of sitting in running
-- with no handler until their lease expires.
local function replayed(lease_key, lease_s, worker, nonce, task_prefix)
  local out = {}
  if nonce == '' then return out end
  for _, tid in ipairs(redis.call('ZRANGEBYSCORE', lease_key, lease_s, lease_s)) do
    local h = hget_map(task_prefix .. tid, claimed_fields)
    if h.status == 'running' and h.worker_id == worker and h.claim == nonce then
      out[#out + 1] = claimed_tuple(tid, h, h.attempt)
    end
  end
  return out
end

-- finish_attempt records the end of a running attempt in one HSET: the
-- given status and extra fields, finished_at, the error of this attempt and
-- its history record. It returns the attempt's duration.
local function finish_attempt(f, h, status, outcome, err_class, err_msg, extra)
  local started = h.started_at or f.now
  local hf, hv = history_field(h, h.worker_id, started, f.now, outcome, err_class, err_msg)
  local fields = {'status', status, 'finished_at', f.now, hf, hv}
  if err_class ~= '' then
    fields[#fields + 1] = 'error_class'; fields[#fields + 1] = err_class
    fields[#fields + 1] = 'error_message'; fields[#fields + 1] = err_msg
  end
  for _, v in ipairs(extra or {}) do fields[#fields + 1] = v end
  redis.call('HSET', f.task_key, unpack(fields))
  trim_history(f.task_key, h, f.attempts_cap)
  return math.max(0, tonumber(f.now) - tonumber(started))
end

-- release_entry acks the task's stream entry and drops its lease. The
-- entry's data is already gone: claim trims what it delivers.
local function release_entry(f, h)
  if h.stream_id and h.stream_id ~= '' then
    redis.call('XACK', f.stream, f.group, h.stream_id)
  end
  redis.call('ZREM', f.lease, f.tid)
end

-- release_key gives back the concurrency-key slot of a task that stops
-- running (finalize, hand-back, reclaim that ends or requeues it): its key's
-- count goes down and the oldest task held back on that key (if any is
-- still queued) goes back to its band stream, where any worker claims it.
-- l: keyrun, held, keywait_prefix, task_prefix, streams (band -> key).
local function release_key(l, h)
  if not l or not h.ckey or h.ckey == '' then return end
  if redis.call('HINCRBY', l.keyrun, h.ckey, -1) <= 0 then
    redis.call('HDEL', l.keyrun, h.ckey)
  end
  local list = l.keywait_prefix .. h.ckey
  while true do
    local tid = redis.call('LPOP', list)
    if not tid then return end
    redis.call('DECR', l.held)
    local tk = l.task_prefix .. tid
    local w = redis.call('HMGET', tk, 'status', 'priority', 'attempt')
    if w[1] == 'queued' then
      local sid = redis.call('XADD', l.streams[tonumber(w[2])], '*', 't', tid, 'a', w[3])
      redis.call('HSET', tk, 'stream_id', sid)
      redis.call('HDEL', tk, 'held')
      return
    end
  end
end

-- wake_limited wakes the workers a queue-wide concurrency limit stopped: a
-- claim that found the limit reached set the flag; a release adds one entry
-- to the wake stream their blocking read waits on. Without the flag (the
-- common case) it costs one EXISTS.
local function wake_limited(l)
  if l and redis.call('EXISTS', l.limited) == 1 then
    redis.call('DEL', l.limited)
    redis.call('XADD', l.wake, 'MAXLEN', '1', '*', 'w', '1')
  end
end

-- limit_keys reads the limit keys and the key wait prefix from KEYS[k..k+3]
-- (keyrun, held, limited, wake), KEYS[b..b+9] (band streams p0..p9) and
-- ARGV[a] (key wait prefix), ARGV[a+1] (task key prefix).
local function limit_keys(k, b, a)
  local streams = {}
  for i = 0, 9 do streams[i] = KEYS[b + i] end
  return {keyrun = KEYS[k], held = KEYS[k + 1], limited = KEYS[k + 2], wake = KEYS[k + 3], streams = streams,
    keywait_prefix = ARGV[a], task_prefix = ARGV[a + 1]}
end

-- cancel_running ends a running attempt whose handler returned an error
-- after a cancel request: cancelled (never retried), retention TTL,
-- TASK_CANCELLED, entry released, depth -1.
-- A cancel request wins over a retry or a dead-letter.
local function cancel_running(f, h, err_msg)
  local dur = finish_attempt(f, h, 'cancelled', 'cancelled', 'Cancelled', err_msg, {'retryable', '0'})
  redis.call('HDEL', f.task_key, 'retry_delay_ms', 'stream_id')
  emit(f.events, f.events_maxlen, 'TASK_CANCELLED', f.tid, h.type, h.attempt, f.now, h.worker_id,
    cjson.encode({reason = 'cancel requested while running'}))
  retain(f, f.task_key, 'cancelled', f.retention, h)
  release_entry(f, h)
  release_key(f.l, h)
  wake_limited(f.l)
  redis.call('DECR', f.depth)
  stat(f.stats, 'cancelled', 1)
  stat(f.stats, 'run_ms_sum', dur)
end

-- bury ends a running task for good: dead_lettered with a DLQ index entry
-- (capped; the oldest leave the index and start retention), or failed with a
-- retention TTL when the DLQ is off. Then its event, idempotency record
-- (failed), entry release, depth -1 and stats. f carries keys and settings.
local function bury(f, h, err_class, err_msg, retryable)
  local status = f.dlq and 'dead_lettered' or 'failed'
  local extra = {'retryable', retryable}
  if f.dlq then extra[3] = 'failed_at'; extra[4] = f.now end
  local dur = finish_attempt(f, h, status, status, err_class, err_msg, extra)
  redis.call('HDEL', f.task_key, 'retry_delay_ms', 'stream_id')
  emit(f.events, f.events_maxlen, f.dlq and 'TASK_DEAD_LETTERED' or 'TASK_FAILED', f.tid, h.type, h.attempt,
    f.now, h.worker_id, cjson.encode({error_class = err_class, attempts_made = tonumber(h.attempt)}))
  if f.dlq then
    redis.call('ZADD', f.dlq_key, f.now, f.tid)
    local over = redis.call('ZCARD', f.dlq_key) - f.dlq_maxlen
    if over > 0 then
      local dropped = redis.call('ZPOPMIN', f.dlq_key, over)
      for i = 1, #dropped, 2 do
        retain(f, f.task_prefix .. dropped[i], 'dead_lettered', f.retention, nil)
      end
    end
  end
  if not f.dlq then retain(f, f.task_key, 'failed', f.retention, h) end
  release_entry(f, h)
  release_key(f.l, h)
  wake_limited(f.l)
  redis.call('DECR', f.depth)
  stat(f.stats, f.dlq and 'dead_lettered' or 'failed', 1)
  stat(f.stats, 'run_ms_sum', dur)
  stat(f.stats, bucket_field('run_b', dur), 1)
end

-- enqueue_due moves a pending or retrying task into its band stream:
-- pending -> queued (TASK_QUEUED); retrying -> queued with attempt +1
-- (TASK_RETRIED). The caller has removed its schedule entry.
local function enqueue_due(c, tid, h)
  local attempt = tonumber(h.attempt)
  local etype = 'TASK_QUEUED'
  if h.status == 'retrying' then
    attempt = attempt + 1
    etype = 'TASK_RETRIED'
  end
  local sid = redis.call('XADD', c.streams[tonumber(h.priority)], '*', 't', tid, 'a', attempt)
  redis.call('HSET', c.task_prefix .. tid, 'status', 'queued', 'attempt', attempt, 'stream_id', sid)
  emit(c.events, c.events_maxlen, etype, tid, h.type, attempt, c.now, '', '')
end

-- dlq_requeue_one puts a dead-lettered task that is in the DLQ index (or,
-- when allowed, a failed task) back in its queue as a fresh start: attempt
-- 1, previous_attempts +1, the last attempt's error cleared, its deadline
-- cleared unless c.expires_at gives a new one (a requeued task must be able
-- to run), the history trimmed so that it stays within the cap, TASK_QUEUED
-- {reason: requeue}, depth +1, and its idempotency record back to
-- processing with a fresh TTL (re-created if it expired; left alone if
-- another task owns it).
-- c: now, task_prefix, idem_prefix, dlq, events, events_maxlen, depth,
-- streams, expiry, expires_at ("" = none), attempts_cap, idem_ttl,
-- allow_failed. Returns "requeued", "conflict" or "not_found".
local function dlq_requeue_one(c, tid)
  local tk = c.task_prefix .. tid
  local h = hget_map(tk, {'status', 'priority', 'type', 'idem_key', 'fingerprint', 'previous_attempts',
    'max_attempts'})
  if not h.status then return 'not_found' end
  if h.status == 'dead_lettered' then
    -- A discarded or dropped entry has left the index: it is not in the DLQ.
    if not redis.call('ZSCORE', c.dlq, tid) then return 'not_found' end
  elseif not (h.status == 'failed' and c.allow_failed) then
    return 'conflict'
  end
  redis.call('ZREM', c.dlq, tid)
  redis.call('PERSIST', tk)
  local sid = redis.call('XADD', c.streams[tonumber(h.priority)], '*', 't', tid, 'a', 1)
  redis.call('HSET', tk, 'status', 'queued', 'attempt', 1, 'stream_id', sid, 'available_at', c.now,
    'previous_attempts', tonumber(h.previous_attempts or '0') + 1)
  redis.call('HDEL', tk, 'finished_at', 'failed_at', 'cancel_requested', 'worker_id', 'started_at',
    'retryable', 'retry_delay_ms', 'error_class', 'error_message', 'claim')
  if c.expires_at ~= '' then
    redis.call('HSET', tk, 'expires_at', c.expires_at)
    redis.call('ZADD', c.expiry, c.expires_at, tid)
  else
    redis.call('HDEL', tk, 'expires_at')
    redis.call('ZREM', c.expiry, tid)
  end
  -- Room for every attempt of the new run: the history never outgrows the cap.
  trim_history_to(tk, c.attempts_cap - tonumber(h.max_attempts or '1'))
  redis.call('INCR', c.depth)
  emit(c.events, c.events_maxlen, 'TASK_QUEUED', tid, h.type, 1, c.now, '', cjson.encode({reason = 'requeue'}))
  if h.idem_key and h.idem_key ~= '' then
    -- The record again with a fresh TTL (re-created if it expired), unless
    -- the key now belongs to another task. The task's own status says it
    -- is in progress again.
    local k = c.idem_prefix .. h.idem_key
    local raw = redis.call('GET', k)
    if not raw or idem_owner(raw) == tid then
      if raw and not h.fingerprint then
        local _, fp = idem_owner(raw)
        if fp then redis.call('HSET', tk, 'fingerprint', fp) end -- kept from an earlier layout's record
      end
      redis.call('SET', k, tid, 'EX', c.idem_ttl)
    end
  end
  return 'requeued'
end

-- dlq_discard_one removes a task from the DLQ index: it stays
-- dead_lettered with metadata.discarded = true and its retention starts.
-- Returns "discarded" or "not_found".
local function dlq_discard_one(c, tid)
  if not redis.call('ZSCORE', c.dlq, tid) then return 'not_found' end
  local tk = c.task_prefix .. tid
  redis.call('ZREM', c.dlq, tid)
  local meta = {}
  local v = redis.call('HMGET', tk, 'metadata', 'ret', 'idem_key')
  local raw = v[1]
  if raw and raw ~= '' then
    local ok, v = pcall(cjson.decode, raw)
    if ok and type(v) == 'table' then meta = v end
  end
  meta.discarded = true
  redis.call('HSET', tk, 'metadata', cjson.encode(meta))
  retain(c, tk, 'dead_lettered', c.retention, {ret = v[2], idem_key = v[3]})
  return 'discarded'
end
