-- retention: how long a finished task is kept, its retained counts, ended markers.
-- Helpers prepended to the scripts that include them (never run on their own).

local rf_names = {}

-- retained_field names the retained-counts field of a task that ended with
-- status and is kept until end_ms: status:<end of its bucket, epoch s>,
-- with buckets of gran ms (see retention_gran).
--! uses: rf_names
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
--! uses: ended_window
local function mark_ended(task_key, now)
  local id_ms = tonumber(string.sub(task_key, -32, -21), 16)
  -- (at most the window: an id's time may run ahead of now)
  local left = id_ms and math.min(ended_window, id_ms + ended_window - tonumber(now)) or ended_window
  if left > 0 then
    redis.call('SET', task_key .. ':ended', '1', 'PX', math.floor(left))
  end
end

-- retain_logs gives the log lists of a task's attempts 1..lg (keys.go
-- TaskLog: the task key with ':log:<attempt>' appended, same slot) the
-- task's retention of ms, or deletes them when it is 0 (or persists them,
-- ms < 0: the task is live again).
local function retain_logs(task_key, lg, ms)
  for a = 1, tonumber(lg) do
    local key = task_key .. ':log:' .. a
    if ms < 0 then
      redis.call('PERSIST', key)
    elseif ms == 0 then
      redis.call('DEL', key)
    else
      redis.call('PEXPIRE', key, ms)
    end
  end
end

local ret_ms = {}

-- The last retention retain turned into text: the tasks of one call nearly
-- always share it. One entry, not a table keyed by ms: a Lua that keeps
-- integer keys in a table's array part (gopher-lua, in dtq dev's in-process
-- Redis) would grow it to ms slots (3.6 million for an hour) on every call.
local ms_last, ms_last_text = nil, nil

-- retention_ms is a retention in seconds (text) as ms, remembered: most
-- tasks of a call have the same one.
--! uses: ret_ms
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
-- retention: retained (hash key), idem_prefix, now (ms). h holds ret and
-- idem_key when the caller read them (nil: read here). Returns the
-- retention in ms, 0 when the task was deleted.
-- The task's deduplication key, if it has one, is released (dedup_end), or
-- keeps the task while it holds it.
--! uses: retained_field, retention_gran, mark_ended, retention_ms, retain_logs, dedup_end, ms_last
local function retain(retention, task_key, status, default_s, h, acc)
  local ret, ikey, lg, dk
  if h then
    ret, ikey, lg, dk = h.ret, h.idem_key, h.lg, h.dk
    -- h[true] says h holds every field (an HGETALL): a task without logs
    -- or a dedup key then costs nothing more. Other callers read only the
    -- fields they need, so lg and dk are read here.
    if not h[true] then
      local v = redis.call('HMGET', task_key, 'lg', 'dk')
      lg, dk = v[1], v[2]
    end
  else
    local v = redis.call('HMGET', task_key, 'ret', 'idem_key', 'lg', 'dk')
    ret, ikey, lg, dk = v[1], v[2], v[3], v[4]
  end
  local ms = retention_ms(ret or default_s)
  if ikey and ikey ~= '' then
    local left = redis.call('PTTL', retention.idem_prefix .. ikey)
    if left > ms then ms = left end
  end
  if dk then
    -- A throttle key the task still holds keeps it as long: a throttled
    -- submission answers with it.
    local held = dedup_end(dk, task_key, string.sub(task_key, -32), status, retention.now)
    if held > ms then ms = held end
  end
  if lg then retain_logs(task_key, lg, ms) end
  if ms <= 0 then
    redis.call('DEL', task_key)
    if not (ikey and ikey ~= '') then mark_ended(task_key, retention.now) end
    return 0
  end
  -- As text, remembered: a number argument is formatted by sprintf, once
  -- per task.
  if ms ~= ms_last then ms_last, ms_last_text = ms, string.format('%d', ms) end
  redis.call('PEXPIRE', task_key, ms_last_text)
  local field = retained_field(status, tonumber(retention.now) + ms, retention_gran(ms))
  if acc then
    acc[field] = (acc[field] or 0) + 1
  else
    redis.call('HINCRBY', retention.retained, field, 1)
  end
  return ms
end

-- flush_retained writes the counts retain gathered in acc.
local function flush_retained(retention, acc)
  for field, n in pairs(acc) do redis.call('HINCRBY', retention.retained, field, n) end
end
