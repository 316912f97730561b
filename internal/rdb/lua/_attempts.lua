-- attempts: a task's attempt history, fencing a finalize on its attempt, the attempt's end.
-- Helpers prepended to the scripts that include them (never run on their own).

local wj_key, wj_val = nil, nil

-- worker_json is cjson.encode(worker), remembered for the last worker: a
-- batch finalizes many tasks of the same one.
--! uses: wj_key
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
--! uses: worker_json
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

local fence_fields = {'status', 'attempt', 'worker_id', 'stream_id', 'type', 'idem_key',
  'started_at', 'max_attempts', 'cancel_requested', 'priority', 'expires_at', 'previous_attempts', 'ckey', 'ret', 'wf'}

local fence_h = {} -- reused by every fence call: see hget_into

-- fence returns the task's fields when it is still running under this worker
-- and attempt, or nil: a worker that lost its lease writes nothing. The
-- table is valid until the next fence call. A hot caller may read fewer
-- fields (fields) into a table of its own (into). claim, when given and not
-- "", must also be the nonce of the claim that started the attempt (a
-- remote worker's lease token names it; a Go worker passes none).
--! uses: hget_into, fence_fields, fence_h
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
--! uses: worker_json
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
  for _, field in ipairs(redis.call('HKEYS', task_key)) do
    local p, a, sub = string.match(field, '^h:(%d+):(%d+):?(%d*)$')
    if p then
      -- A handback record (h:p:a:<ms>) comes before its attempt's final one.
      recs[#recs + 1] = {tonumber(p), tonumber(a), sub == '' and math.huge or tonumber(sub), field}
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
  'max_attempts', 'idem_key', 'created_at', 'cancel_requested', 'metadata', 'priority', 'wf', 'deps'}

-- claimed_put appends one started task to out, a flat list, as claim and
-- reclaim return it: a head "<n> <attempt> <timeout_ms> <max_attempts>
-- <created_at> <cancel_requested> <priority> <id>" (its numeric fields
-- joined, the id last), then the n elements that follow it: type,
-- payload, metadata, and with n >= 4 the idempotency key, with n = 6 the
-- workflow node and its deps. Redis turns every element and every nested
-- table of a reply into RESP at a cost: one text for the numbers, and no
-- table per task, cost less than 11 to 13 elements in a table each.
local function claimed_put(out, tid, h, attempt)
  local n, wf, ik = #out, h.wf, h.idem_key
  local k = wf and '6 ' or (ik and ik ~= '' and '4 ' or '3 ')
  out[n + 1] = k .. attempt .. ' ' .. (h.timeout_ms or '') .. ' ' .. (h.max_attempts or '') .. ' ' ..
    (h.created_at or '0') .. ' ' .. (h.cancel_requested or '0') .. ' ' .. (h.priority or '') .. ' ' .. tid
  out[n + 2] = h.type or ''
  out[n + 3] = h.payload or '{}'
  out[n + 4] = h.metadata or '{}'
  if k ~= '3 ' then
    out[n + 5] = ik or ''
    if wf then
      out[n + 6] = wf
      out[n + 7] = h.deps or '{}'
    end
  end
end

-- replayed returns (flat, see claimed_put) the tasks an earlier run of this
-- very call started: a claim or reclaim whose reply was lost is sent again
-- with the same arguments, and the tasks it started (lease until lease_s,
-- this worker, this call's nonce) must reach the worker instead of sitting
-- in running with no handler until their lease expires.
--! uses: hget_map, claimed_fields, claimed_put
local function replayed(lease_key, lease_s, worker, nonce, task_prefix)
  local out = {}
  if nonce == '' then return out end
  for _, tid in ipairs(redis.call('ZRANGEBYSCORE', lease_key, lease_s, lease_s)) do
    local h = hget_map(task_prefix .. tid, claimed_fields)
    if h.status == 'running' and h.worker_id == worker and h.claim == nonce then
      claimed_put(out, tid, h, h.attempt)
    end
  end
  return out
end

-- finish_attempt records the end of a running attempt in one HSET: the
-- given status and extra fields, finished_at, the error of this attempt and
-- its history record. It returns the attempt's duration.
--! uses: history_field, trim_history
local function finish_attempt(finish, h, status, outcome, err_class, err_msg, extra)
  local started = h.started_at or finish.now
  local hf, hv = history_field(h, h.worker_id, started, finish.now, outcome, err_class, err_msg)
  local fields = {'status', status, 'finished_at', finish.now, hf, hv}
  if err_class ~= '' then
    fields[#fields + 1] = 'error_class'; fields[#fields + 1] = err_class
    fields[#fields + 1] = 'error_message'; fields[#fields + 1] = err_msg
  end
  for _, v in ipairs(extra or {}) do fields[#fields + 1] = v end
  redis.call('HSET', finish.task_key, unpack(fields))
  trim_history(finish.task_key, h, finish.attempts_cap)
  return math.max(0, tonumber(finish.now) - tonumber(started))
end

-- release_entry acks the task's stream entry and drops its lease. The
-- entry's data is already gone: claim trims what it delivers.
local function release_entry(finish, h)
  if h.stream_id and h.stream_id ~= '' then
    redis.call('XACK', finish.stream, finish.group, h.stream_id)
  end
  redis.call('ZREM', finish.lease, finish.tid)
end
