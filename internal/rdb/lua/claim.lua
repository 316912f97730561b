-- claim: deliver up to N ready tasks of one queue to a worker, highest
-- priority band first, and move each queued -> running in the same call.
--
-- Entries are read with XREADGROUP inside the script, band by band, asking
-- each band only for the slots still free, so nothing is over-delivered.
-- What a band delivered is then trimmed from it (XTRIM MINID, exact): a
-- band stream holds exactly its undelivered entries, so XLEN is the ready
-- count, and finalizes only XACK. One trim per band and call walks a node
-- once, where an XDEL per entry would seek through it every time.
-- An entry ingest wrote carries the fields the claim needs (field c): the
-- claim then reads no hash (see the band loop); any other entry has its hash
-- read whole.
-- Per entry: a task whose hash is gone or terminal is acked and dropped; an
-- entry that is not the task's current entry is absorbed
-- (TASK_DUPLICATE_ABSORBED); an overdue task expires (TASK_EXPIRED); else
-- the task starts: status running, lease, TASK_STARTED (left out with the
-- limits field events = "outcomes").
--
-- KEYS[1] lease: lease ZSET
-- KEYS[2] expiry: expiry ZSET
-- KEYS[3] schedule: schedule ZSET
-- KEYS[4] events: event stream
-- KEYS[5] depth: depth counter
-- KEYS[6] paused: paused flag
-- KEYS[7] stats: stats hash (current minute)
-- KEYS[8..17] bands: band streams p0..p9
-- KEYS[18] limits: limits hash
-- KEYS[19] rate: rate state (GCRA arrival time)
-- KEYS[20] key_running: key-running hash
-- KEYS[21] held: held counter
-- KEYS[22] limited: limited flag
-- KEYS[23] retained: retained counts hash
-- KEYS[24] outbox: workflow outbox stream
-- KEYS[25] fair_state: fair state hash
-- KEYS[26] fair_keys: fair keys ZSET (queued tasks per key)
-- KEYS[27] fair_delay: fair delay ZSET (keys parked until their key_rate
--   token)
-- KEYS[28] key_rate: key rate state ZSET (key -> GCRA arrival time)
-- KEYS[29] wake: wake stream (fair ingest writes it)
-- KEYS[30] key_freed: key slot release time (lua/_limits.lua, key_freed)
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] worker_id: worker id (consumer)
-- ARGV[3] group: consumer group
-- ARGV[4] max int: max tasks
-- ARGV[5] lease_ms int64: lease duration (ms)
-- ARGV[6] task_prefix: task key prefix
-- ARGV[7] idem_prefix: idempotency key prefix
-- ARGV[8] events_max_len int64: events maxlen
-- ARGV[9] failed_ret_s int64: failed retention (s)
-- ARGV[10] nonce: call nonce: a call sent again with the same arguments
--   after its reply was lost answers the tasks its first run started (see
--   replayed) instead of starting more
-- ARGV[11] key_wait_prefix: key wait list prefix
-- ARGV[12] fair_active: fair active keys prefix (+ band)
-- ARGV[13] key_queue: key queue prefix (+ band .. ':' .. key)
--
-- Flow control (docs/flow-control.md): the queue's limits cap how many
-- tasks the call may start: concurrency by the lease set's size (every
-- running task has a lease, and a crashed worker's comes back at reclaim),
-- rate by a GCRA token bucket. A task whose concurrency key is at its limit
-- leaves the stream for its key's wait list (held; still queued) and goes
-- back to its band when a task of that key stops running. A task started
-- under key_concurrency gets a started_at no earlier than the latest slot
-- release (see key_freed): the claim ran after the release that let it
-- start, whatever time its worker read before the call.
--
-- With fairness, key_order or key_rate set (limits field "fair"), tasks wait
-- in key queues (lua/_fair.lua) and starts rotate over the keys by weight
-- (stride scheduling, O(log K) per start): the band streams are then only
-- the key queues' inbox, sorted by each claim (at most 1000 entries a
-- call). A key at its key_concurrency or out of key_rate tokens is parked
-- (score +inf), not scanned.
--
-- Returns: {state string, tasks []string, last_ids []string, wait_ms int, reason string, held int}
--   state "paused" (nothing read), "ok", "nogroup" (a band had no group), or
--          "limited" (a limit allows no start now; nothing read; or, with
--          reason key_rate, the tasks it did start and no other one until
--          a key's token is due)
--   wait_ms: with "limited", how long until the next token, or -1: until a
--          running task finishes (the releasing finalize writes the wake
--          stream)
--   reason: with "limited", "rate", "concurrency" or "key_rate"
--   held: tasks this call held back by key_concurrency
--   tasks: one flat list (lua/_attempts.lua, claimed_put): per task a head
--          "<n> <attempt> <timeout_ms> <max_attempts> <created_at>
--          <cancel_requested> <priority> <id>", then n elements: type,
--          payload, metadata[, idem_key[, wf, deps]]
--   last_ids: when the bands ran out before the slots did, the newest
--          entry id of each band p9..p0 (all delivered; to block on with
--          XREAD), and with key queues the wake stream's newest id last;
--          else empty.
--
--! include: emit, stats_flush, entry_body, keep_body, expire_task, after_id, hgetall_into, flat_map, is_terminal
--! include: bucket_field, claimed_put, replayed, fair_enter, fair_leave, fair_unpark

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

local lim = redis.call('HMGET', KEYS[18], 'rate_limit', 'rate_period_ms', 'burst', 'concurrency', 'key_concurrency',
  'fair', 'events')
-- events: outcomes (limits field "events") leaves TASK_STARTED out: read
-- with the limits, it costs no command.
local start_events = lim[7] ~= 'outcomes'
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

-- start_at is the started_at of a task of key ck: now, or for a task under
-- key_concurrency the latest slot release time when that is later (read
-- once per call).
local freed_s = nil
local function start_at(ck)
  if not key_conc or not ck or ck == '' then return now_s end
  if freed_s == nil then
    freed_s = redis.call('GET', KEYS[30]) or now_s
    if tonumber(freed_s) <= now then freed_s = now_s end
  end
  return freed_s
end
local wait_ms, reason, last_wake = 0, '', false

local streams = {}
for b = 0, 9 do streams[b] = KEYS[8 + b] end
local ctx = {
  now = now, task_prefix = ARGV[6], idem_prefix = ARGV[7], events = KEYS[4],
  events_maxlen = ARGV[8], retention = ARGV[9], streams = streams,
  schedule = KEYS[3], expiry = KEYS[2], depth = KEYS[5], retained = KEYS[23], outbox = KEYS[24],
}
local tasks, read, state = {}, 0, 'ok'
local h = {} -- the task's fields (the read of its hash)

local band_text = {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}
local task_prefix, events_key, events_maxlen = ARGV[6], KEYS[4], ARGV[8]
local wait_sum = 0 -- ms the tasks started waited, for the stats

-- gone tells, from the reply of the HSET that started a task read from its
-- entry alone (added: the fields it added, of n), that the hash did not exist:
-- an existing one has its status already. The write is undone.
local function gone(task_key, added, n)
  if added < n then return false end
  redis.call('DEL', task_key)
  return true
end

-- hold moves queued task tid, whose concurrency key ck is at its limit,
-- out of band b's stream into the key's wait list, in order, so that other
-- keys' tasks pass it; the caller acks the entry.
local function hold(tid, task_key, ck, b, eid, entry_fields)
  redis.call('RPUSH', ARGV[11] .. ck, tid)
  keep_body(task_key, streams[b], eid, entry_fields)
  redis.call('HSET', task_key, 'held', '1')
  redis.call('HDEL', task_key, 'stream_id')
  redis.call('INCR', KEYS[21])
  held = held + 1
end
local leases, acc = {}, {}
local empty = {} -- bands that held nothing: no read, and 0-0 to block on

-- start moves queued task tid (its fields in h) to running under this
-- call's lease; entry_fields are its stream entry's, when it has one.
local function start(tid, task_key, entry_fields)
  started = started + 1
  if h.ckey then
    key_cnt[h.ckey] = key_count(h.ckey) + 1
    redis.call('HINCRBY', KEYS[20], h.ckey, 1)
  end
  -- The entry goes with the trim below: its payload and metadata move
  -- into the hash in the same write.
  local p, m = entry_body(entry_fields)
  local at = start_at(h.ckey)
  if m then
    h.payload, h.metadata = p, m
    redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', at, 'claim', nonce,
      'payload', p, 'metadata', m)
  elseif p then
    h.payload = p
    redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', at, 'claim', nonce,
      'payload', p)
  else
    redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', at, 'claim', nonce)
  end
  if h.error_class then -- a retry: clear the previous attempt's outcome
    redis.call('HDEL', task_key, 'finished_at', 'error_class', 'error_message', 'retryable', 'retry_delay_ms')
  end
  leases[#leases + 1] = lease_s
  leases[#leases + 1] = tid
  if h.expires_at then redis.call('ZREM', KEYS[2], tid) end
  if start_events then emit(ctx.events, ctx.events_maxlen, 'TASK_STARTED', tid, h.type, h.attempt, now_s, worker, '') end
  local wait = math.max(0, now - tonumber(h.created_at or now))
  wait_sum = wait_sum + wait
  local bf = bucket_field('wait_b', wait)
  acc[bf] = (acc[bf] or 0) + 1
  claimed_put(tasks, tid, h, h.attempt)
  remaining = remaining - 1
end

if lim[6] then
  -- Fairness, key_order or key_rate: the key queues (lua/_fair.lua).
  -- The fields a task's hash read fills h with (hgetall_into).
  local fields = {'status', 'attempt', 'stream_id', 'type', 'priority', 'expires_at',
    'idem_key', 'payload', 'timeout_ms', 'max_attempts', 'created_at', 'cancel_requested', 'metadata',
    'error_class', 'ckey', 'ret', 'wf', 'deps'}
  -- finished reports whether status st leaves nothing to run.
  local function finished(st)
    return st == nil or is_terminal(st)
  end

  local fl = redis.call('HMGET', KEYS[18], 'fair_default', 'key_rate_limit', 'key_rate_period_ms', 'key_burst', 'key_order')
  local F = {state = KEYS[25], keys = KEYS[26], delay = KEYS[27], act_prefix = ARGV[12], kq_prefix = ARGV[13],
    task_prefix = ctx.task_prefix, vt = {}}
  local fifo = fl[5] == 'fifo'
  local default_w = tonumber(fl[1] or '1')
  local krate_n, kperiod = tonumber(fl[2]), tonumber(fl[3])
  local kinterval, ktol = nil, 0
  if krate_n and kperiod and krate_n > 0 then
    kinterval = kperiod / krate_n
    ktol = (tonumber(fl[4] or '1') - 1) * kinterval
  end
  local strides = {}
  local function stride(k)
    local s = strides[k]
    if s == nil then
      local w = k ~= '' and tonumber(redis.call('HGET', KEYS[18], 'w:' .. k) or '') or default_w
      s = math.floor(1000000 / w)
      strides[k] = s
    end
    return s
  end
  local budget = 1000 -- entries sorted per call

  -- Keys whose key_rate token is due are active again.
  local due = redis.call('ZRANGEBYSCORE', F.delay, '-inf', now_s, 'LIMIT', 0, 100)
  if #due > 0 then
    redis.call('ZREM', F.delay, unpack(due))
    for _, m in ipairs(due) do fair_unpark(F, tonumber(string.sub(m, 1, 1)), string.sub(m, 3)) end
  end
  if kinterval then
    -- A token time that has passed is a full bucket: drop it.
    redis.call('ZREMRANGEBYSCORE', KEYS[28], '-inf', now_s)
  end

  -- The band streams are the key queues' inbox: whatever entered the
  -- queue without ingest (a retry, hand-back, reclaim, DLQ requeue,
  -- released workflow node or held task) and, from before fairness was
  -- set, every task. Each entry is sorted into its key's queue; an entry
  -- "k" (a key's running task stopped, see release_key) unparks its key.
  for b = 9, 0, -1 do
    if redis.call('XLEN', streams[b]) == 0 then
      empty[b] = true
    else
      local res = redis.pcall('XREADGROUP', 'GROUP', group, worker, 'COUNT', budget, 'STREAMS', streams[b], '>')
      if type(res) == 'table' and res.err then
        state = 'nogroup'
      elseif res then
        local delivered = res[1][2]
        budget = budget - #delivered
        if budget <= 0 then more = true end
        for _, entry in ipairs(delivered) do
          read = read + 1
          local eid, entry_fields = entry[1], entry[2]
          if entry_fields[1] == 'k' then
            fair_unpark(F, b, entry_fields[2])
          else
            local tid = entry_fields[2]
            local task_key = ctx.task_prefix .. tid
            h.kseq, h.held = nil, nil
            hgetall_into(h, task_key, fields)
            local st = h.status
            if finished(st) then
              -- nothing to run
            elseif st ~= 'queued' or h.stream_id ~= eid then
              emit(ctx.events, ctx.events_maxlen, 'TASK_DUPLICATE_ABSORBED', tid, h.type, h.attempt, now_s, worker,
                cjson.encode({entry_id = eid, status = st}))
            elseif h.expires_at and tonumber(h.expires_at) <= now then
              expire_task(ctx, tid, h, entry_fields)
            else
              keep_body(task_key, streams[b], eid, entry_fields)
              local seq = fifo and h.kseq
              if not seq then
                seq = redis.call('HINCRBY', F.state, 'seq', 1)
                redis.call('HSET', task_key, 'kseq', seq)
              end
              if h.held then redis.call('HDEL', task_key, 'stream_id', 'held')
              else redis.call('HDEL', task_key, 'stream_id') end
              fair_enter(F, b, tid, h.ckey or '', seq)
            end
          end
          redis.call('XACK', streams[b], group, eid)
        end
        local minid = #delivered > 0 and after_id(delivered[#delivered][1])
        if minid then
          redis.call('XTRIM', streams[b], 'MINID', minid)
        end
      end
    end
  end

  -- Starts: per band, highest first, the active key with the lowest pass
  -- gives its oldest task. O(log K) per start.
  local krate_tat = {}
  local blocked = false -- a band still has active keys this call left
  budget = 1000 -- keys parked and entries dropped per call
  for b = 9, 0, -1 do
    local act = F.act_prefix .. b
    while remaining > 0 do
      if budget <= 0 then blocked = true; break end
      local top = redis.call('ZRANGE', act, 0, 0, 'WITHSCORES')
      if #top == 0 or top[2] == 'inf' then break end
      local k, pass = top[1], top[2]
      F.vt[b] = pass
      local kq = F.kq_prefix .. b .. ':' .. k
      local head = redis.call('ZRANGE', kq, 0, 0)
      local tid = head[1]
      if not tid then
        redis.call('ZREM', act, k) -- emptied outside a claim (fairness switched)
        budget = budget - 1
      else
        local task_key = ctx.task_prefix .. tid
        hgetall_into(h, task_key, fields)
        local st = h.status
        local tat = nil
        if finished(st) or st ~= 'queued' or h.stream_id then
          -- gone, finished, or queued in a stream again (sorted anew there)
          redis.call('ZREM', kq, tid)
          fair_leave(F, b, k)
          budget = budget - 1
        elseif h.expires_at and tonumber(h.expires_at) <= now then
          redis.call('ZREM', kq, tid)
          fair_leave(F, b, k)
          expire_task(ctx, tid, h, nil)
          budget = budget - 1
        elseif k ~= '' and key_conc and key_count(k) >= key_conc then
          -- At its key_concurrency: parked until a task of the key stops
          -- running (release_key pops the marker and writes a "k" entry).
          redis.call('ZADD', act, 'XX', '+inf', k)
          redis.call('RPUSH', ARGV[11] .. k, '#' .. b)
          held = held + 1
          budget = budget - 1
        else
          if k ~= '' and kinterval then
            tat = krate_tat[k]
            if tat == nil then tat = tonumber(redis.call('ZSCORE', KEYS[28], k) or '0') end
            tat = math.max(tat, now)
            if tat - now > ktol then
              -- No key_rate token: parked until the next one.
              redis.call('ZADD', act, 'XX', '+inf', k)
              redis.call('ZADD', F.delay, math.ceil(tat - ktol), b .. ':' .. k)
              budget = budget - 1
              tat = false
            end
          end
          if tat ~= false then
            redis.call('ZREM', kq, tid)
            fair_leave(F, b, k)
            start(tid, task_key, nil)
            if tat then krate_tat[k] = tat + kinterval end
            if redis.call('EXISTS', kq) == 1 then
              -- %.0f: integers exact to 2^53, where the default %.14g would round
              redis.call('ZADD', act, 'XX', string.format('%.0f', tonumber(pass) + stride(k)), k)
            else
              redis.call('ZREM', act, k)
            end
          end
        end
      end
    end
  end
  for k, tat in pairs(krate_tat) do
    redis.call('ZADD', KEYS[28], string.format('%.3f', tat), k)
  end
  local vt = {}
  for b, v in pairs(F.vt) do
    vt[#vt + 1] = 'vt' .. b
    vt[#vt + 1] = v
  end
  if #vt > 0 then redis.call('HSET', F.state, unpack(vt)) end
  if remaining > 0 and not more and not blocked and state == 'ok' then
    -- Nothing more to start now. A key waiting for its key_rate token:
    -- sleep until then; else block on the bands (a release that unparks
    -- a key writes there) and the wake stream (fair ingest writes there).
    local first = redis.call('ZRANGE', F.delay, 0, 0, 'WITHSCORES')
    if first[1] then
      state = 'limited'
      wait_ms = math.max(1, math.ceil(tonumber(first[2]) - now))
      reason = 'key_rate'
    else
      last_wake = true
    end
  elseif blocked or more then
    more = true
  end
else
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
      local task_key = task_prefix .. tid
      -- An entry ingest wrote carries the fields the claim needs (its field
      -- c: type, timeout_ms, max_attempts, created_at ("" = the time in the
      -- id; the reply then leaves it empty too), expires_at, concurrency
      -- key): such a task starts from the entry alone, no hash read, its
      -- fields in locals. An entry still in its band is its task's current
      -- one, and the task still queued with the fields ingest gave it,
      -- since every way out of queued (cancel, expiry, purge, a dedup
      -- replace) deletes the entry, and nothing changes those fields of a
      -- queued task. A hash gone all the same (deleted by hand, evicted)
      -- shows in the reply of the write that starts the task (see gone).
      -- Any other entry (a retry, reclaim, hand-back, requeue or release),
      -- and an overdue task, which expires with the fields retention needs,
      -- has its hash read.
      local c = entry_fields[7] == 'c' and entry_fields[8] or (entry_fields[9] == 'c' and entry_fields[10])
      local ty, tmo, ma, ca, ex, ck
      if c then
        ty, tmo, ma, ca, ex, ck = string.match(c, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
        if ty and ex ~= '' and tonumber(ex) <= now then ty = nil end
      end
      if ty then
        if ck ~= '' and key_conc and key_count(ck) >= key_conc then
          -- Its key is at its limit (see hold), unless its hash is gone:
          -- a rare path, it may look.
          if redis.call('EXISTS', task_key) == 1 then hold(tid, task_key, ck, b, eid, entry_fields) end
          redis.call('XACK', streams[b], group, eid)
        else
          -- The entry goes with the trim below: its payload and metadata
          -- move into the hash in the same write, which comes first: its
          -- reply tells whether the hash was there (gone).
          local p, m = entry_body(entry_fields)
          local added, n
          local at = ck == '' and now_s or start_at(ck)
          if m then
            added, n = redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', at,
              'claim', nonce, 'payload', p, 'metadata', m), 6
          elseif p then
            added, n = redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', at,
              'claim', nonce, 'payload', p), 5
          else
            added, n = redis.call('HSET', task_key, 'status', 'running', 'worker_id', worker, 'started_at', at,
              'claim', nonce), 4
          end
          if gone(task_key, added, n) then
            redis.call('XACK', streams[b], group, eid)
          else
            -- start's steps, written out for the fields in locals: this is
            -- the path of nearly every task of a queue without key queues.
            -- A task from ingest has no previous attempt's outcome to clear.
            started = started + 1
            if ck ~= '' then
              key_cnt[ck] = key_count(ck) + 1
              redis.call('HINCRBY', KEYS[20], ck, 1)
            end
            local attempt = entry_fields[4]
            leases[#leases + 1] = lease_s
            leases[#leases + 1] = tid
            if ex ~= '' then redis.call('ZREM', KEYS[2], tid) end
            if start_events then
              emit(events_key, events_maxlen, 'TASK_STARTED', tid, ty, attempt, now_s, worker, '')
            end
            -- (hex to a number: cheaper than the decimal created_at would be)
            local wait = now - (ca == '' and tonumber(string.sub(tid, 1, 12), 16) or tonumber(ca))
            if wait < 0 then wait = 0 end
            wait_sum = wait_sum + wait
            local bf = bucket_field('wait_b', wait)
            acc[bf] = (acc[bf] or 0) + 1
            -- claimed_put's head and elements, written out for the fields
            -- in locals: a call a task costs about 1,400 instructions
            -- (bench/scriptcost.sh: claim 112,600 -> 114,000 per task)
            local nt = #tasks
            tasks[nt + 1] = '3 ' .. attempt .. ' ' .. tmo .. ' ' .. ma .. ' ' .. ca .. ' 0 ' .. band_text[b] .. ' ' .. tid
            tasks[nt + 2] = ty
            tasks[nt + 3] = p or '{}'
            tasks[nt + 4] = m or '{}'
            remaining = remaining - 1
          end
        end
      else
        -- Read as a RESP3 map, the reply is the field table itself, filled
        -- by Redis; back to RESP2 at once: the rest expects its replies.
        redis.setresp(3)
        local r = redis.call('HGETALL', task_key)
        redis.setresp(2)
        h = r.map or flat_map(r)
        local st = h.status
        local drop = true
        if st == nil or is_terminal(st) then
          -- gone or finished: nothing to run
        elseif st ~= 'queued' or h.stream_id ~= eid then
          emit(events_key, events_maxlen, 'TASK_DUPLICATE_ABSORBED', tid, h.type, h.attempt, now_s, worker,
            cjson.encode({entry_id = eid, status = st}))
        elseif h.expires_at and tonumber(h.expires_at) <= now then
          redis.call('XACK', streams[b], group, eid)
          expire_task(ctx, tid, h, entry_fields)
        elseif h.ckey and key_conc and key_count(h.ckey) >= key_conc then
          hold(tid, task_key, h.ckey, b, eid, entry_fields)
        else
          drop = false
          start(tid, task_key, entry_fields)
        end
        if drop then
          redis.call('XACK', streams[b], group, eid)
        end
      end
    end
    local minid = #delivered > 0 and after_id(delivered[#delivered][1])
    if minid then
      redis.call('XTRIM', streams[b], 'MINID', minid)
    end
  end
end
end

if #leases > 0 then
  redis.call('ZADD', KEYS[1], unpack(leases))
  acc.started, acc.wait_ms_sum = started, wait_sum
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
  if last_wake then
    local newest = redis.call('XREVRANGE', KEYS[29], '+', '-', 'COUNT', 1)
    last_ids[#last_ids + 1] = newest[1] and newest[1][1] or '0-0'
  end
end
return {state, tasks, last_ids, wait_ms, reason, held}
