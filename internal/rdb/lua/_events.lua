-- events: the event stream entries and their timestamps, the per-minute stats counters.
-- Helpers prepended to the scripts that include them (never run on their own).

-- emit's argument list, refilled on every call; built at its full size, since
-- a table grown one slot at a time is rehashed four times on the way to 14.
local ev_buf = {'type', false, 'task_id', false, 'task_type', false, 'attempt', false,
  'ts', false, 'worker_id', false, 'meta', false}

local ts_small = {}

local ts_now_s, ts_now = nil, nil -- the last now event_age turned into a number

-- event_age is the ts field of an event of a task whose id carries the
-- time id_ms (a number): the ms since then, a small integer Redis stores
-- in one to four bytes where an epoch-ms time takes nine. Readers tell it
-- from an epoch-ms ts by size: an offset is under 1e11 ms (three years).
--! uses: ts_small, ts_now_s
local function event_age(id_ms, now)
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

-- event_ts is an event's ts field: for a task's event, its event_age; else
-- now itself.
--! uses: event_age
local function event_ts(tid, now)
  local id_ms = tid ~= '' and tonumber(string.sub(tid, 1, 12), 16)
  if not id_ms then return now end
  return event_age(id_ms, now)
end

-- emit appends one lifecycle event to a queue's event stream. Every entry
-- has the same seven fields in the same order (worker_id and meta empty
-- when there are none): Redis then stores the field names once per stream
-- node instead of once per entry. The fields go through one reused table:
-- hot scripts emit once per task.
-- ts, when given, is the entry's ts field as event_ts would compute it (a
-- caller that has it spares the script the hex and number conversions).
--! uses: ev_buf, event_ts
local function emit(events_key, maxlen, etype, tid, ttype, attempt, now, worker, meta, ts)
  local ev = ev_buf
  ev[2], ev[4], ev[6], ev[8] = etype, tid, ttype, attempt or 0
  ev[10], ev[12], ev[14] = ts or event_ts(tid, now), worker or '', meta or ''
  return redis.call('XADD', events_key, 'MAXLEN', '~', maxlen, '*', unpack(ev, 1, 14))
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
--! uses: stat
local function stats_flush(stats_key, acc)
  for field, n in pairs(acc) do stat(stats_key, field, n) end
end

-- log2_bucket names the power-of-two latency bucket of ms for stats fields.
local function log2_bucket(ms)
  if ms < 1 then return 0 end
  return math.floor(math.log(ms) / math.log(2)) + 1
end

local bucket_names = {}

-- bucket_field is prefix .. log2_bucket(ms), remembered: building it costs a
-- number-to-text conversion, once per task otherwise.
--! uses: log2_bucket, bucket_names
local function bucket_field(prefix, ms)
  local k = log2_bucket(ms)
  local t = bucket_names[prefix]
  if not t then t = {}; bucket_names[prefix] = t end
  local name = t[k]
  if not name then name = prefix .. k; t[k] = name end
  return name
end
