-- claim: deliver up to N ready tasks of one queue to a worker, highest
-- priority band first, and move each queued -> running in the same call.
--
-- Entries are read with XREADGROUP inside the script, band by band, asking
-- each band only for the slots still free, so nothing is over-delivered.
-- What a band delivered is then trimmed from it (XTRIM MINID, exact): a
-- band stream holds exactly its undelivered entries, so XLEN is the ready
-- count, and finalizes only XACK. One trim per band and call walks a node
-- once, where an XDEL per entry would seek through it every time.
-- Per entry: a task whose hash is gone or terminal is acked and dropped; an
-- entry that is not the task's current entry is absorbed
-- (TASK_DUPLICATE_ABSORBED); an overdue task expires (TASK_EXPIRED); else
-- the task starts: status running, lease, TASK_STARTED.
--
-- KEYS[1] lease ZSET        KEYS[2] expiry ZSET      KEYS[3] schedule ZSET
-- KEYS[4] event stream      KEYS[5] depth counter    KEYS[6] paused flag
-- KEYS[7] stats hash (current minute)
-- KEYS[8..17] band streams p0..p9
-- KEYS[18] limits hash      KEYS[19] rate state (GCRA arrival time)
-- KEYS[20] key-running hash KEYS[21] held counter  KEYS[22] limited flag
-- KEYS[23] retained counts hash  KEYS[24] workflow outbox stream
--
-- ARGV[1] now (ms)          ARGV[2] worker id (consumer)  ARGV[3] group
-- ARGV[4] max tasks         ARGV[5] lease duration (ms)   ARGV[6] task key prefix
-- ARGV[7] idempotency key prefix  ARGV[8] events maxlen   ARGV[9] failed retention (s)
-- ARGV[10] call nonce: a call sent again with the same arguments after its
--          reply was lost answers the tasks its first run started (see
--          replayed) instead of starting more
-- ARGV[11] key wait list prefix
--
-- Flow control (docs/flow-control.md): the queue's limits cap how many
-- tasks the call may start: concurrency by the lease set's size (every
-- running task has a lease, and a crashed worker's comes back at reclaim),
-- rate by a GCRA token bucket. A task whose concurrency key is at its limit
-- leaves the stream for its key's wait list (held; still queued) and goes
-- back to its band when a task of that key stops running.
--
-- Returns {state, tasks, last_ids, wait_ms, reason, held}:
--   state "paused" (nothing read), "ok", "nogroup" (a band had no group), or
--          "limited" (a limit allows no start now; nothing read)
--   wait_ms: with "limited", how long until the next token, or -1: until a
--          running task finishes (the releasing finalize writes the wake
--          stream)
--   reason: with "limited", "rate" or "concurrency"
--   held: tasks this call held back by key_concurrency
--   tasks: list of {id, attempt, type, payload, timeout_ms, max_attempts,
--          idem_key, created_at, cancel_requested, metadata, priority, wf, deps}
--   last_ids: when the bands ran out before the slots did, the newest
--          entry id of each band p9..p0 (all delivered; to block on with
--          XREAD); else empty.
--
--! include: emit, stats_flush, entry_body, keep_body, expire_task, after_id, hgetall_into
--! include: bucket_field, claimed_tuple, replayed

-- now_s and lease_s go into arguments as text: a Lua number is turned back
-- into text by a costly float formatting.
local now_s = ARGV[1]
local now = tonumber(now_s)
local worker, group = ARGV[2], ARGV[3]
local remaining = tonumber(ARGV[4])
local lease_s = tostring(now + tonumber(ARGV[5]))

local nonce = ARGV[10]
local again = replayed(KEYS[1], lease_s, worker, nonce, ARGV[6])
if #again > 0 then
  return {'ok', again, {}, 0, '', 0}
end

if redis.call('EXISTS', KEYS[6]) == 1 then
  return {'paused', {}, {}, 0, '', 0}
end

local lim = redis.call('HMGET', KEYS[18], 'rate_limit', 'rate_period_ms', 'burst', 'concurrency', 'key_concurrency')
local rate_n, period, conc, key_conc = tonumber(lim[1]), tonumber(lim[2]), tonumber(lim[4]), tonumber(lim[5])
if conc then
  local free = conc - redis.call('ZCARD', KEYS[1])
  if free <= 0 then
    redis.call('SET', KEYS[22], '1', 'PX', 60000)
    return {'limited', {}, {}, -1, 'concurrency', 0}
  end
  remaining = math.min(remaining, free)
end
local interval, tat = nil, nil
if rate_n and period and rate_n > 0 then
  interval = period / rate_n
  local tolerance = (tonumber(lim[3] or '1') - 1) * interval
  tat = math.max(tonumber(redis.call('GET', KEYS[19]) or '0'), now)
  local ahead = tat - now
  if ahead > tolerance then
    return {'limited', {}, {}, math.ceil(ahead - tolerance), 'rate', 0}
  end
  remaining = math.min(remaining, math.floor((tolerance - ahead) / interval) + 1)
end
local key_cnt = {}
local function key_count(ck)
  local n = key_cnt[ck]
  if n == nil then
    n = tonumber(redis.call('HGET', KEYS[20], ck) or '0')
    key_cnt[ck] = n
  end
  return n
end
local held, started, more = 0, 0, false

local streams = {}
for b = 0, 9 do streams[b] = KEYS[8 + b] end
local ctx = {
  now = now, task_prefix = ARGV[6], idem_prefix = ARGV[7], events = KEYS[4],
  events_maxlen = ARGV[8], retention = ARGV[9], streams = streams,
  schedule = KEYS[3], expiry = KEYS[2], depth = KEYS[5], retained = KEYS[23], outbox = KEYS[24],
}
local fields = {'status', 'attempt', 'stream_id', 'type', 'priority', 'expires_at',
  'idem_key', 'payload', 'timeout_ms', 'max_attempts', 'created_at', 'cancel_requested', 'metadata',
  'error_class', 'ckey', 'ret', 'wf', 'deps'}

local tasks, read, state = {}, 0, 'ok'
local h = {} -- each entry's task fields, refilled (hget_into)
local leases, acc = {}, {}
local empty = {} -- bands that held nothing: no read, and 0-0 to block on
for b = 9, 0, -1 do
  if remaining <= 0 then break end
  -- A band stream holds only undelivered entries (see the trim below), so
  -- an empty one needs no XREADGROUP. A missing group then shows up once
  -- the band has an entry.
  local res = nil
  if redis.call('XLEN', streams[b]) == 0 then
    empty[b] = true
  else
    res = redis.pcall('XREADGROUP', 'GROUP', group, worker, 'COUNT', remaining, 'STREAMS', streams[b], '>')
  end
  if type(res) == 'table' and res.err then
    state = 'nogroup'
  elseif res then
    local delivered = res[1][2]
    if #delivered >= remaining then more = true end -- the band may hold more
    for _, entry in ipairs(delivered) do
      read = read + 1
      local eid, entry_fields = entry[1], entry[2]
      local tid = entry_fields[2]
      local task_key = ctx.task_prefix .. tid
      hgetall_into(h, task_key, fields)
      local st = h.status
      local drop = true
      if st == nil or st == 'succeeded' or st == 'failed' or st == 'dead_lettered'
          or st == 'cancelled' or st == 'expired' then
        -- gone or finished: nothing to run
      elseif st ~= 'queued' or h.stream_id ~= eid then
        emit(ctx.events, ctx.events_maxlen, 'TASK_DUPLICATE_ABSORBED', tid, h.type, h.attempt, now_s, worker,
          cjson.encode({entry_id = eid, status = st}))
      elseif h.expires_at and tonumber(h.expires_at) <= now then
        redis.call('XACK', streams[b], group, eid)
        expire_task(ctx, tid, h, entry_fields)
      elseif h.ckey and key_conc and key_count(h.ckey) >= key_conc then
        -- Its key is at its limit: out of the stream into the key's wait
        -- list, in order, so that other keys' tasks pass it.
        redis.call('RPUSH', ARGV[11] .. h.ckey, tid)
        keep_body(task_key, streams[b], eid, entry_fields)
        redis.call('HSET', task_key, 'held', '1')
        redis.call('HDEL', task_key, 'stream_id')
        redis.call('INCR', KEYS[21])
        held = held + 1
      else
        drop = false
        started = started + 1
        if h.ckey then
          key_cnt[h.ckey] = key_count(h.ckey) + 1
          redis.call('HINCRBY', KEYS[20], h.ckey, 1)
        end
        -- The entry goes with the trim below: its payload and metadata
        -- move into the hash in the same write.
        local p, m = entry_body(entry_fields)
        if m then
          h.payload, h.metadata = p, m
          redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', now_s, 'claim', nonce,
            'payload', p, 'metadata', m)
        elseif p then
          h.payload = p
          redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', now_s, 'claim', nonce,
            'payload', p)
        else
          redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', now_s, 'claim', nonce)
        end
        if h.error_class then -- a retry: clear the previous attempt's outcome
          redis.call('HDEL', task_key, 'finished_at', 'error_class', 'error_message', 'retryable', 'retry_delay_ms')
        end
        leases[#leases + 1] = lease_s
        leases[#leases + 1] = tid
        if h.expires_at then redis.call('ZREM', KEYS[2], tid) end
        emit(ctx.events, ctx.events_maxlen, 'TASK_STARTED', tid, h.type, h.attempt, now_s, worker, '')
        local wait = math.max(0, now - tonumber(h.created_at or now))
        local b = bucket_field('wait_b', wait)
        acc['started'] = (acc['started'] or 0) + 1
        acc['wait_ms_sum'] = (acc['wait_ms_sum'] or 0) + wait
        acc[b] = (acc[b] or 0) + 1
        tasks[#tasks + 1] = claimed_tuple(tid, h, h.attempt)
        remaining = remaining - 1
      end
      if drop then
        redis.call('XACK', streams[b], group, eid)
      end
    end
    local minid = #delivered > 0 and after_id(delivered[#delivered][1])
    if minid then
      redis.call('XTRIM', streams[b], 'MINID', minid)
    end
  end
end

if #leases > 0 then
  redis.call('ZADD', KEYS[1], unpack(leases))
  stats_flush(KEYS[7], acc)
end
if interval and started > 0 then
  tat = tat + started * interval
  redis.call('SET', KEYS[19], string.format('%.3f', tat), 'PX', math.ceil(tat - now + period))
end

-- Every band was read until empty when slots are left over: return, per
-- band, the newest entry the stream holds (every entry up to it has been
-- delivered; after the trim that is only an entry a claim before this
-- version left behind), or 0-0 for an empty stream, so the caller can block
-- right away on "anything newer". XREVRANGE COUNT 1 is cheap; XINFO GROUPS
-- would also compute the group's lag.
local last_ids = {}
if remaining > 0 and state == 'ok' and not more then
  for b = 9, 0, -1 do
    if empty[b] then
      last_ids[#last_ids + 1] = '0-0'
    else
      local newest = redis.call('XREVRANGE', streams[b], '+', '-', 'COUNT', 1)
      last_ids[#last_ids + 1] = newest[1] and newest[1][1] or '0-0'
    end
  end
end
return {state, tasks, last_ids, 0, '', held}
