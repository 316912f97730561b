-- ingest: create one or more tasks of one queue, atomically per task.
--
-- For each task, in order: idempotency check (stale -> mismatch -> in progress
-- -> replay; the record is the task id, and the task hash holds the
-- fingerprint and, in its status, whether the task is still in progress),
-- depth gate, idempotency claim, task hash, stream entry (or
-- schedule entry when delayed), expiry index, listing index, depth counter,
-- TASK_QUEUED / TASK_PENDING event. A replay writes nothing. The record is
-- read and, when there is none, claimed by one SET NX GET (most keyed
-- submissions are new); a submission the depth gate then refuses deletes
-- it again in the same call, so a refusal leaves nothing behind.
--
-- A task due now carries its payload (and metadata) in its band stream
-- entry, not in its hash: the hash then holds only short fields and Redis
-- keeps it as a listpack, less than a third of a hashtable's size. The
-- claim moves them into the hash (see keep_body); a delayed task keeps them
-- in its hash from the start. The entry of a task without an idempotency
-- key also carries, in field c (built by the caller: rdb.claimFields), the
-- fields the claim hands the worker and decides by (type, timeout_ms,
-- max_attempts, created_at unless it is the time in the id, expires_at,
-- concurrency key, tab-separated; "" for none): while the entry is in its
-- band none of them can change, so the claim reads no hash (claim_entry in
-- claim.lua).
--
-- KEYS[1] depth: depth counter
-- KEYS[2] schedule: schedule ZSET
-- KEYS[3] expiry: expiry ZSET
-- KEYS[4] recent: listing index LIST (ids without their last four digits,
--   newest first)
-- KEYS[5] events: event stream
-- KEYS[6..] tasks: per task its hash (a task without an idempotency key is
--   fenced by the marker its deletion at once leaves, this key with
--   ":ended" appended: Keys.TaskEnded)
-- KEYS[6 + 1*n] number: the queue's number key (Keys.QueueNum), which every
--   id of the call must carry
-- KEYS[7 + 1*n] stats: this minute's stats hash, where the tasks created
--   due now are counted by five-second slot of the minute (fields a0..a11):
--   the arrival rate an autoscaler reads
--
-- Then, in a call for a queue the caller saw with key queues (the fair
-- keys):
-- KEYS[8 + 1*n] fair_on?: fair flag (set while the queue has key queues)
-- KEYS[9 + 1*n] fair_state?: fair state hash
-- KEYS[10 + 1*n] fair_keys?: fair keys ZSET
-- KEYS[11 + 1*n] wake?: wake stream
--
-- Band streams are the stream prefix and the priority (same slot): naming
-- all ten as keys made every call carry ten keys it mostly does not use.
--
-- ARGV[1] now int64: now (epoch ms)
-- ARGV[2] max_depth int64: max depth
-- ARGV[3] events_max_len int64: events maxlen
-- ARGV[4] recent_cap int64: listing index cap
-- ARGV[5] task_prefix: task key prefix
-- ARGV[6] result_prefix: result key prefix
-- ARGV[7] count int: number of tasks
-- ARGV[8] stream_prefix: band stream prefix
-- ARGV[9] settle: "1": settle (see below); "o": the queue's events are
--   outcomes (events: outcomes, as the caller last read it): no
--   TASK_PENDING or TASK_QUEUED for the tasks created; else ""
-- ARGV[10] dedup: "" or, in a call where a task carries a dedup spec, the
--   dedup settings, tab-separated: dedup record prefix (keys.go
--   DedupPrefix), idempotency key prefix, retained counts hash, stats hash
--   (this minute), waiting ZSET, cancelled retention (s), dedup counts hash
--   -- keys of the queue's slot, named here because only calls that
--   deduplicate use them
-- ARGV[11] number: the queue's number the ids carry (their last four hex
--   digits), in decimal, as the number key holds it
-- ARGV[12] fair: "" or, with the fair keys, the fair active keys prefix and
--   the key queue prefix, tab-separated
-- ARGV[13..] tasks []any: the tasks, one after the other, each ten arguments and then
-- what its tenth announces: id, type, payload, priority, max_attempts,
-- timeout_ms, created_at, the creation event's ts (now less the id's
-- time, ms: see event_ts), the band entry's field c ("" = none: the entry
-- then goes without it; see the header), and the optional fields the task
-- has, as one letter each in this order ("" = none; the task is then due
-- at created_at), each letter followed, after the ten, by its value(s) in
-- the same order: a available_at (epoch ms; after now = pending), k
-- idempotency key, its record key, fingerprint (a SHA-256 as its 32
-- bytes) and record TTL (s), e expires_at, m metadata (absent = {}), c
-- concurrency key, r retention once finished (s; absent = the workers'
-- setting), p keep the payload once succeeded (no value), d the dedup
-- spec (mode, ttl, window and max wait in ms ("" = none) and the key,
-- tab-separated)
--
-- Safe to send twice: a task this call already created (its record names
-- it, or its hash or ended marker exists) answers created
-- again and writes nothing, so a call resent after its reply was lost
-- answers what its first run answered.
--
-- Returns: any
-- one reply per task, in a list; a call of one task returns its reply
-- alone (a list built for one reply costs its conversion; decodeIngest
-- reads it):
--   status text: created ("queued", "pending" or "waiting"; the id is the
--                one sent, so it is not repeated)
--   {"created", id, status, replaced id}
--                         (a replace or keep_last submission that cancelled
--                         its key's queued task: that task's id, kept in the
--                         new task's hash, field rp, so that a resend
--                         answers it too while the hash lives)
--   {"duplicate", id, {task hash as flat array}, result or false}
--   {"in_progress", id}
--   {"mismatch", id}
--   {"full", depth}
--   {"absent", id}        (settling only: not created, and now never will be)
--   {"deduplicated", id, mode, {task hash as flat array}, result or false}
--                         (drop, throttle, debounce: the submission was
--                         collapsed into task id, its key's task)
--
-- An error reply "QNUM_MISSING" or "QNUM_MISMATCH <number>", before
-- anything is written, when the queue's number key is absent or differs
-- from the number in the ids (a lost or re-created registry, a stale cache):
-- the caller learns the number from the registry and sends again.
--
-- Settling (ARGV[9] = "1") is the last word on a call whose every reply was
-- lost: it answers as a resend would, except that a task not yet created is
-- marked never to be created and answered absent, and nothing is created.
--
-- A queue with fairness, key_order or key_rate set (the fair flag, which a
-- call with the fair keys reads with the queue's number in one MGET) takes
-- a task due now into its key's queue (lua/_fair.lua) instead of its band
-- stream, with its payload in its hash and a key sequence number; one wake
-- stream entry per call wakes blocked workers. A call without the fair
-- keys (the caller's view of the flag is at most a second old) writes band
-- stream entries, which the claims sort into the key queues.
--
-- Deduplication (docs/deduplication.md; lua/_dedup.lua holds the record's
-- layout) is decided after the idempotency check and before the depth
-- gate: drop, throttle and debounce may collapse the submission into the
-- key's task (written nowhere but in the record a resend reads: the
-- idempotency record, or for a keyless task its ended marker, becomes
-- "=" .. mode letter .. task id [.. fingerprint]); replace and keep_last
-- cancel the key's queued task (TASK_DEDUPLICATED) and create the new
-- one, which keep_last creates waiting while the key's task runs. The
-- cancel is written out here (retain's and keep_body's steps for a task
-- that never ran): as helpers they would cost every call, deduplicating or
-- not, their closures, some 15,000 instructions a call.
--
--! include: emit, ended_window, later_ms, int_ge, is_terminal

local A = ARGV -- a local: every task reads a dozen arguments
local now = A[1]
-- Numbers stay text where they can: tonumber runs strtod (a thousand
-- instructions for an epoch-ms time), and a number passed to a command is
-- formatted back with sprintf.
local max_depth_s = A[2]
local events_maxlen = A[3]
local task_prefix = A[5]
local result_prefix = A[6]
local n = A[7] == '1' and 1 or tonumber(A[7])
local stream_prefix = A[8]
local settle = A[9] == '1'
local create_events = A[9] ~= 'o'
local fair_call = A[12] ~= ''

-- The dedup settings (see the header), in a call that deduplicates.
local D = nil
if A[10] ~= '' then
  local v = {}
  for part in string.gmatch(A[10], '[^\t]+') do v[#v + 1] = part end
  D = {prefix = v[1], idem_prefix = v[2], retained = v[3], stats = v[4], waiting = v[5], cancel_ret = v[6],
    counts = v[7], now_n = tonumber(now)}
end

local F = nil -- the key queues, when the queue has them

-- The ids carry the queue's number in their last four hex digits; it must
-- be the number the queue was first registered under, so that the registry,
-- rebuilt from the per-queue keys, resolves every id to its own queue. The
-- number key and the depth counter are read together.
local depth_s = '0'
if n > 0 then
  local got
  if fair_call then
    got = redis.call('MGET', KEYS[6 + n], KEYS[1], KEYS[8 + n])
    if got[3] then
      local act, kq = string.match(A[12], '^([^\t]*)\t(.*)$')
      F = {state = KEYS[9 + n], keys = KEYS[10 + n], act_prefix = act, kq_prefix = kq, vt = {}}
    end
  else
    got = redis.call('MGET', KEYS[6 + n], KEYS[1])
  end
  local qnum = got[1]
  if not qnum then
    return redis.error_reply('QNUM_MISSING')
  end
  if qnum ~= A[11] then
    return redis.error_reply('QNUM_MISMATCH ' .. qnum)
  end
  depth_s = got[2] or '0'
end

-- created is a created task's reply: its status, or with the task a
-- replace or keep_last submission cancelled, the whole reply.
local function created_reply(id, st, rp)
  if rp then return {'created', id, st, rp} end
  return st
end

local replies = {}
local depth, max_depth = nil, nil -- as numbers, once a call creates a second task
local created = 0
local arrived = 0 -- created tasks due now (not delayed, not waiting)
local recent = nil -- the listing index entries, in a call of several tasks
local fair_band = nil -- set when a task of this call entered a key queue
local hset_args = nil -- the task hash's fields, when a task has optional ones

local ab = 13 -- the first argument of task i
for i = 1, n do
  local task_key = KEYS[5 + i]
  local id, ttype, payload = A[ab], A[ab + 1], A[ab + 2]
  local priority, max_attempts, timeout_ms = A[ab + 3], A[ab + 4], A[ab + 5]
  local created_at, ev_ts, cf, x = A[ab + 6], A[ab + 7], A[ab + 8], A[ab + 9]
  local available_at = created_at
  local ikey, idem_key, fingerprint, idem_ttl = '', nil, '', nil
  local expires_at, metadata, ckey, ret, keep, spec = '', '', '', '', '', ''
  ab = ab + 10
  if x ~= '' then
    for c = 1, #x do
      local l = string.byte(x, c)
      if l == 97 then -- a
        available_at = A[ab]
      elseif l == 107 then -- k: four values
        ikey, idem_key, fingerprint, idem_ttl = A[ab], A[ab + 1], A[ab + 2], A[ab + 3]
        ab = ab + 3
      elseif l == 101 then -- e
        expires_at = A[ab]
      elseif l == 109 then -- m
        metadata = A[ab]
      elseif l == 99 then -- c
        ckey = A[ab]
      elseif l == 114 then -- r
        ret = A[ab]
      elseif l == 112 then -- p: no value
        keep = '1'
        ab = ab - 1
      else -- d
        spec = A[ab]
      end
      ab = ab + 1
    end
  end
  -- A task without a key is fenced by its ended marker.
  if not idem_key then idem_key = task_key .. ':ended' end
  -- the status a created task has (also what a resend of this call answers)
  local delayed = later_ms(available_at, now)
  local status = delayed and 'pending' or 'queued'

  local reply = nil
  local claimed = false -- this call wrote the idempotency record
  -- "=<mode letter><task id>[fingerprint]": this call's first run collapsed
  -- the submission into its dedup key's task (see Deduplication below)
  local mark = nil
  if ikey ~= '' then
    local raw = redis.call('SET', idem_key, id, 'NX', 'GET', 'EX', idem_ttl)
    claimed = not raw
    if raw == id then
      -- The record names this very task: this call is being sent again
      -- after its reply was lost, and its first run created the task.
      -- (A deduplicated task may have been created waiting: its own
      -- status says, and its hash names the task it cancelled.)
      if spec ~= '' then
        local c = redis.call('HMGET', task_key, 'status', 'rp')
        reply = created_reply(id, c[1] or status, c[2])
      else
        reply = status
      end
    elseif raw == '!' .. id then
      reply = {'absent', id} -- settled: never created, and never will be
    elseif raw and string.byte(raw) == 61 then
      -- A submission with this key was collapsed into its dedup key's
      -- task: the same work answers that again (below).
      if string.sub(raw, 35) ~= fingerprint then
        reply = {'mismatch', string.sub(raw, 3, 34)}
      else
        mark = raw
      end
    elseif raw then
      -- The record is its task's id. A record whose task hash is gone
      -- (retention) is stale: it is replaced below and the submission is
      -- new work.
      local owner = raw
      local o = redis.call('HMGET', task_prefix .. owner, 'status', 'fingerprint')
      local st = o[1]
      if st then
        if o[2] ~= fingerprint then
          reply = {'mismatch', owner}
        elseif not is_terminal(st) then
          reply = {'in_progress', owner}
        else
          local res = redis.call('GET', result_prefix .. owner)
          -- A task that ended holds its payload in its hash (every way out
          -- of the queue moves it there), so the hash is the whole task.
          reply = {'duplicate', owner, redis.call('HGETALL', task_prefix .. owner), res}
        end
      end
    end
  end

  -- A task without a key: its hash exists only if this call is being sent
  -- again after its reply was lost (ids are unique), or its marker says it
  -- was created and has already ended and been deleted (see retain).
  local m = nil -- a keyless task's marker, when read
  if ikey == '' and (settle or spec ~= '') then
    m = redis.call('GET', idem_key)
    if m and string.byte(m) == 61 then mark, m = m, nil end
  end
  -- A collapsed submission answers its key's task again while that task
  -- exists; once it is gone, the submission is new work (a keyed one's
  -- record is then stale; a keyless one's first run created nothing).
  if mark then
    local owner, c = string.sub(mark, 3, 34), string.sub(mark, 2, 2)
    if redis.call('EXISTS', task_prefix .. owner) == 1 then
      reply = {'deduplicated', owner, c == 'd' and 'drop' or c == 't' and 'throttle' or 'debounce',
        redis.call('HGETALL', task_prefix .. owner), redis.call('GET', result_prefix .. owner)}
    end
  end
  if ikey == '' and reply == nil then
    if settle then
      if m == '!' then
        reply = {'absent', id}
      elseif m or redis.call('EXISTS', task_key) == 1 then
        reply = status
      end
    elseif spec ~= '' then
      local c = redis.call('HMGET', task_key, 'status', 'rp')
      if m or c[1] then reply = created_reply(id, c[1] or status, c[2]) end
    elseif redis.call('EXISTS', task_key, idem_key) > 0 then
      -- (a '!' marker, see settle, also lands here: that call's answer
      -- reaches nobody, and it writes nothing)
      reply = status
    end
  end

  -- Settling: where this call would create the task, it marks the task as
  -- never to be created instead (the record becomes "!<id>", or the marker
  -- "!"), so that a run of the same call still on its way to Redis (a
  -- request stalled in a dead connection) can create nothing afterwards;
  -- the answer, absent, is then true for good.
  if settle and reply == nil then
    if ikey ~= '' then
      redis.call('SET', idem_key, '!' .. id, 'EX', idem_ttl) -- replaces this call's claim, or a stale record
    else
      redis.call('SET', idem_key, '!', 'PX', ended_window)
    end
    reply = {'absent', id}
  end

  -- Deduplication: collapse into the key's task, or find the task to
  -- displace (replace, keep_last) or wait behind (keep_last).
  local dk, drec, displace, park = nil, nil, nil, nil
  if reply == nil and spec ~= '' then
    local mode, ttl, win, mw, key = string.match(spec, '^([%a_]+)\t(%d*)\t(%d*)\t(%d*)\t(.+)$')
    dk = D.prefix .. key
    local r = redis.call('HMGET', dk, 'id', 'm', 'f', 'run')
    local hid = r[1]
    local hkey = hid and task_prefix .. hid
    local hv = hid and redis.call('HMGET', hkey, 'status', 'type', 'attempt', 'available_at') or {}
    local hst = hv[1]
    local into = nil -- the mode letter of a collapse
    if mode == 'drop' then
      if hst and not is_terminal(hst) then into = 'd' end
    elseif mode == 'throttle' then
      -- The record lives for the ttl, and keeps its task as long (see
      -- retain); a task deleted by hand frees the key.
      if hst then into = 't' end
    elseif mode == 'debounce' then
      -- Only a task that still waits takes the submission: pending, not
      -- due yet and its first submission's max wait not reached. One due
      -- (the promoter may not have queued it yet) waits no more: this
      -- submission makes a new task with a new window, as one after the
      -- task was queued does, rather than pushing back a task that was
      -- about to start or handing it a payload sent after its deadline.
      local cur = hst == 'pending' and r[2] == 'debounce' and tonumber(hv[4] or '0')
      local cap = cur and mw ~= '' and tonumber(r[3]) + tonumber(mw)
      if cur and D.now_n < cur and not (cap and D.now_n >= cap) then
        -- The waiting task takes this payload and waits window more,
        -- never past the first submission's time + max wait, and never
        -- less than it already waits (a delay it was given).
        local due = D.now_n + tonumber(win)
        if cap and due > cap then due = cap end
        if due < cur then due = cur end
        redis.call('HSET', hkey, 'payload', payload, 'available_at', string.format('%d', due))
        if metadata ~= '' then
          redis.call('HSET', hkey, 'metadata', metadata)
        else
          redis.call('HDEL', hkey, 'metadata')
        end
        redis.call('ZADD', KEYS[2], 'XX', due, hid)
        into = 'b'
      end
    elseif mode == 'replace' then
      if hst == 'pending' or hst == 'queued' then displace = hid end
    else -- keep_last
      -- The running task a waiting one waits behind (run), if it still runs.
      local run = r[4]
      if run and is_terminal(redis.call('HGET', task_prefix .. run, 'status') or 'succeeded') then run = nil end
      if hst == 'pending' or hst == 'queued' or hst == 'waiting' then
        displace, park = hid, run
      elseif hst and not is_terminal(hst) then
        park = hid -- running or retrying: the new task waits for it
      end
    end
    if into then
      local mark = '=' .. into .. hid
      if ikey ~= '' then
        redis.call('SET', idem_key, mark .. fingerprint, 'EX', idem_ttl)
      else
        redis.call('SET', idem_key, mark, 'PX', ended_window)
      end
      local mname = into == 'd' and 'drop' or into == 't' and 'throttle' or 'debounce'
      redis.call('HINCRBY', D.counts, mname, 1)
      emit(KEYS[5], events_maxlen, 'TASK_DEDUPLICATED', hid, hv[2] or ttype, hv[3] or '1', now, '',
        '{"mode":"' .. mname .. '"}')
      reply = {'deduplicated', hid, mname, redis.call('HGETALL', hkey), redis.call('GET', result_prefix .. hid)}
    else
      -- This submission becomes the key's task: its record is written
      -- with the task (after the depth gate).
      -- (a debounce task's available_at includes its window already)
      drec = {mode = mode, ttl = ttl}
    end
  end

  if reply == nil then
    local full
    if displace then
      full = false -- one task out, one in
    elseif created == 0 then
      full = int_ge(depth_s, max_depth_s)
    else
      if not depth then depth, max_depth = tonumber(depth_s), tonumber(max_depth_s) end
      full = depth + created >= max_depth
    end
    if full then
      reply = {'full', created == 0 and depth_s or tostring(depth + created)}
      if claimed then redis.call('DEL', idem_key) end
    end
  end

  if reply == nil and drec then
    -- A new record: this submission's task is the key's task now.
    redis.call('DEL', dk)
    if park then
      redis.call('HSET', dk, 'id', id, 'm', drec.mode, 'run', park, 'w', D.waiting, 's', KEYS[2])
    elseif drec.mode == 'debounce' then
      -- max wait counts from the submission's own time, which its
      -- available_at counts from too: the call may run later (a merged
      -- call waits for the one before it, a resend comes later still)
      redis.call('HSET', dk, 'id', id, 'm', drec.mode, 'f', created_at)
    else
      redis.call('HSET', dk, 'id', id, 'm', drec.mode)
    end
    if drec.ttl ~= '' then redis.call('PEXPIRE', dk, drec.ttl) end
  end

  if reply == nil and displace then
    -- Cancel the key's queued task, as cancel.lua would, with the event
    -- TASK_DEDUPLICATED (its record is this submission's from now on; drec
    -- holds the mode: a displacing submission always makes a new record).
    local hk = task_prefix .. displace
    local v = redis.call('HMGET', hk, 'status', 'priority', 'attempt', 'type', 'idem_key', 'stream_id', 'ret', 'lg')
    local hst, hprio, hattempt, htype, hikey, hsid, hret, hlg = v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]
    if hsid and hsid ~= '' then
      -- its payload and metadata from its stream entry into its hash (keep_body)
      local stream = stream_prefix .. hprio
      local e = redis.call('XRANGE', stream, hsid, hsid)
      local f = e[1] and e[1][2]
      if f and f[5] == 'p' then
        if f[7] == 'm' then
          redis.call('HSET', hk, 'payload', f[6], 'metadata', f[8])
        else
          redis.call('HSET', hk, 'payload', f[6])
        end
      end
      redis.call('XDEL', stream, hsid)
      redis.call('HDEL', hk, 'stream_id')
    end
    redis.call('ZREM', KEYS[2], displace)
    redis.call('ZREM', KEYS[3], displace)
    if hst == 'waiting' then redis.call('ZREM', D.waiting, displace) end
    redis.call('HSET', hk, 'status', 'cancelled', 'finished_at', now)
    redis.call('DECR', KEYS[1])
    emit(KEYS[5], events_maxlen, 'TASK_DEDUPLICATED', displace, htype, hattempt, now, '',
      '{"mode":"' .. drec.mode .. '","replaced_by":"' .. id .. '","previous_status":"' .. hst .. '"}')
    -- Its retention (retain): its own or the cancelled one, at least its
    -- idempotency record's; counted in the retained hash under its bucket.
    -- Its record is this submission's now: nothing to release.
    local ms = tonumber(hret or D.cancel_ret) * 1000
    if hikey then
      local left = redis.call('PTTL', D.idem_prefix .. hikey)
      if left > ms then ms = left end
    end
    for a = 1, tonumber(hlg or '0') do
      if ms <= 0 then
        redis.call('DEL', hk .. ':log:' .. a)
      else
        redis.call('PEXPIRE', hk .. ':log:' .. a, ms)
      end
    end
    if ms <= 0 then
      redis.call('DEL', hk)
      if not hikey then redis.call('SET', hk .. ':ended', '1', 'PX', ended_window) end
    else
      redis.call('PEXPIRE', hk, ms)
      local gran = ms <= 21600000 and 60000 or 3600000
      local bucket = math.ceil((D.now_n + ms) / gran) * gran / 1000
      redis.call('HINCRBY', D.retained, 'cancelled:' .. string.format('%d', bucket), 1)
    end
    if redis.call('HINCRBY', D.stats, 'cancelled', 1) == 1 then redis.call('EXPIRE', D.stats, 7200) end
    redis.call('HINCRBY', D.counts, drec.mode, 1)
  end

  if reply == nil then
    if ikey ~= '' and not claimed then
      redis.call('SET', idem_key, id, 'EX', idem_ttl) -- replaces a stale record
    end

    if park then status = 'waiting' end
    local fseq = nil -- its key sequence number, when it goes to a key queue
    if x == '' and not (delayed or F or dk or displace) then
      -- The plain task, due at once (park and delay need an optional
      -- field): its fields as the call's arguments, no table. The stream
      -- entry id is part of the hash, so the entry is added first; inside
      -- the script the order cannot be observed. c: what the claim would
      -- read from the hash (see the header), built by the caller (a
      -- concatenation here costs more than the argument).
      local sid
      if cf == '' then
        sid = redis.call('XADD', stream_prefix .. priority, '*', 't', id, 'a', '1', 'p', payload)
      else
        sid = redis.call('XADD', stream_prefix .. priority, '*', 't', id, 'a', '1', 'p', payload, 'c', cf)
      end
      redis.call('HSET', task_key, 'type', ttype, 'priority', priority, 'created_at', created_at,
        'max_attempts', max_attempts, 'attempt', '1', 'timeout_ms', timeout_ms, 'status', status, 'stream_id', sid)
    else
      -- One argument list reused for every task (unpack with an explicit
      -- length): a table built per task would be grown five times.
      if not hset_args then
        hset_args = {false, false, false, false, false, false, false, false, false, false, false, false, false,
          false, false, false, false, false, false, false, false, false, false, false}
      end
      local args = hset_args
      args[1], args[2], args[3], args[4], args[5], args[6] = 'type', ttype, 'priority', priority, 'created_at', created_at
      args[7], args[8], args[9], args[10] = 'max_attempts', max_attempts, 'attempt', '1'
      args[11], args[12] = 'timeout_ms', timeout_ms
      args[13], args[14] = 'status', status
      local nf = 14
      -- available_at is stored only when it differs from created_at: most
      -- tasks are due at once, and every byte of a task hash counts.
      if available_at ~= created_at then
        args[nf + 1], args[nf + 2] = 'available_at', available_at
        nf = nf + 2
      end
      if ikey ~= '' then
        -- kept so that a DLQ requeue can re-create an expired record
        args[nf + 1], args[nf + 2], args[nf + 3], args[nf + 4] = 'idem_key', ikey, 'fingerprint', fingerprint
        nf = nf + 4
      end
      if expires_at ~= '' then
        args[nf + 1], args[nf + 2] = 'expires_at', expires_at
        nf = nf + 2
      end
      if dk then
        args[nf + 1], args[nf + 2] = 'dk', dk
        nf = nf + 2
      end
      if displace then
        -- the task it cancelled, which a resend of this call answers again
        args[nf + 1], args[nf + 2] = 'rp', displace
        nf = nf + 2
      end
      if delayed or F or park then
        args[nf + 1], args[nf + 2] = 'payload', payload
        nf = nf + 2
        if metadata ~= '' then
          args[nf + 1], args[nf + 2] = 'metadata', metadata
          nf = nf + 2
        end
      end
      if ckey ~= '' then
        args[nf + 1], args[nf + 2] = 'ckey', ckey
        nf = nf + 2
      end
      if ret ~= '' then
        args[nf + 1], args[nf + 2] = 'ret', ret
        nf = nf + 2
      end
      if keep == '1' then
        args[nf + 1], args[nf + 2] = 'keep', '1'
        nf = nf + 2
      end
      if park then
        redis.call('ZADD', D.waiting, now, id)
      elseif delayed then
        redis.call('ZADD', KEYS[2], available_at, id)
      elseif F then
        fseq = redis.call('HINCRBY', F.state, 'seq', 1)
        args[nf + 1], args[nf + 2] = 'kseq', fseq
        nf = nf + 2
      else
        args[nf + 1] = 'stream_id'
        local stream = stream_prefix .. priority
        if cf == '' then
          if metadata ~= '' then
            args[nf + 2] = redis.call('XADD', stream, '*', 't', id, 'a', '1', 'p', payload, 'm', metadata)
          else
            args[nf + 2] = redis.call('XADD', stream, '*', 't', id, 'a', '1', 'p', payload)
          end
        elseif metadata ~= '' then
          args[nf + 2] = redis.call('XADD', stream, '*', 't', id, 'a', '1', 'p', payload, 'm', metadata, 'c', cf)
        else
          args[nf + 2] = redis.call('XADD', stream, '*', 't', id, 'a', '1', 'p', payload, 'c', cf)
        end
        nf = nf + 2
      end
      redis.call('HSET', task_key, unpack(args, 1, nf))
    end
    if fseq then
      -- fair_enter (lua/_fair.lua) written out: as a helper it would cost
      -- every call, fair or not, its closure.
      local vt = F.vt[priority] or redis.call('HGET', F.state, 'vt' .. priority) or '0'
      F.vt[priority] = vt
      redis.call('ZADD', F.kq_prefix .. priority .. ':' .. ckey, fseq, id)
      redis.call('HINCRBY', F.state, 'n' .. priority, 1)
      redis.call('ZINCRBY', F.keys, 1, ckey)
      redis.call('ZADD', F.act_prefix .. priority, 'NX', vt, ckey)
      fair_band = priority
    end
    if expires_at ~= '' then
      redis.call('ZADD', KEYS[3], expires_at, id)
    end

    -- The id without its last four digits, the queue's number (the same in
    -- every id of the queue): 28 bytes fit a smaller allocation than 32.
    if n == 1 then
      recent = string.sub(id, 1, 28)
    else
      if not recent then recent = {} end
      recent[#recent + 1] = string.sub(id, 1, 28)
    end
    created = created + 1
    if not delayed and not park then arrived = arrived + 1 end

    if park then
      if create_events then
        emit(KEYS[5], events_maxlen, 'TASK_PENDING', id, ttype, '1', now, '', '{"waiting_for":"' .. park .. '"}', ev_ts)
      end
    elseif create_events then
      emit(KEYS[5], events_maxlen, delayed and 'TASK_PENDING' or 'TASK_QUEUED', id, ttype, '1', now, '', '', ev_ts)
    end

    reply = created_reply(id, status, displace)
  end
  replies[i] = reply
end

-- Indexes and the counter once per call: the listing index and depth
-- change only by the tasks created above. A LIST costs ~31 bytes an id
-- where a ZSET took ~130, and LPUSH answers the length the cap needs.
if recent then
  local len
  if n == 1 then
    len = redis.call('LPUSH', KEYS[4], recent)
  else
    len = redis.call('LPUSH', KEYS[4], unpack(recent))
  end
  local cap = tonumber(A[4])
  if len > cap then
    redis.call('LTRIM', KEYS[4], 0, cap - 1)
  end
  redis.call('INCRBY', KEYS[1], created == 1 and '1' or tostring(created))
end
-- Arrivals by five-second slot of the minute: an autoscaler's rate over
-- the last half minute needs a finer grain than the minute. The hash
-- lives as long as the minute's other counters.
if arrived > 0 then
  local slot = 'a' .. string.format('%d', math.floor((tonumber(now) % 60000) / 5000))
  if redis.call('HINCRBY', KEYS[7 + n], slot, arrived) == arrived then
    redis.call('EXPIRE', KEYS[7 + n], 7200)
  end
end
if fair_band then
  redis.call('XADD', KEYS[11 + n], 'MAXLEN', '1', '*', 'w', '1')
end
if n == 1 then return replies[1] end
return replies
