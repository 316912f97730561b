-- limits: concurrency-key slots given back and limited workers woken.
-- Helpers prepended to the scripts that include them (never run on their own).

-- key_freed records limits.now as the latest time a concurrency-key slot
-- was given back (limits.freed), once per call, never moving it back. A
-- claim stamps a task it starts under key_concurrency no earlier (see
-- claim.lua): each worker reads its clock before its call reaches Redis, so
-- a claim that ran after a release may carry an earlier time than the
-- release did, and the two tasks' recorded runs would overlap although the
-- second started after the first gave its slot back.
local function key_freed(limits)
  if limits.freed_noted then return end
  limits.freed_noted = true
  if tonumber(redis.call('GET', limits.freed) or '0') < tonumber(limits.now) then
    redis.call('SET', limits.freed, limits.now)
  end
end

-- release_key gives back the concurrency-key slot of a task that stops
-- running (finalize, hand-back, reclaim that ends or requeues it): its key's
-- count goes down (the time noted, see key_freed) and the oldest task held
-- back on that key (if any is still queued) goes back to its band stream,
-- where any worker claims it; or, with key queues, the key parked first is
-- unparked.
-- limits: keyrun, held, keywait_prefix, task_prefix, streams (band -> key),
-- freed, now.
--! uses: key_freed
local function release_key(limits, h)
  if not limits or not h.ckey or h.ckey == '' then return end
  key_freed(limits)
  if redis.call('HINCRBY', limits.keyrun, h.ckey, -1) <= 0 then
    redis.call('HDEL', limits.keyrun, h.ckey)
  end
  local list = limits.keywait_prefix .. h.ckey
  while true do
    local tid = redis.call('LPOP', list)
    if not tid then return end
    if string.byte(tid, 1) == 35 then
      -- '#' .. band: the key is parked in that band of its key queues
      -- (lua/_fair.lua): an entry "k" makes the next claim unpark it. All
      -- its bands are unparked at once, so that its highest one goes first.
      redis.call('XADD', limits.streams[tonumber(string.sub(tid, 2))], '*', 'k', h.ckey)
    else
      redis.call('DECR', limits.held)
      local task_key = limits.task_prefix .. tid
      local w = redis.call('HMGET', task_key, 'status', 'priority', 'attempt')
      if w[1] == 'queued' then
        local sid = redis.call('XADD', limits.streams[tonumber(w[2])], '*', 't', tid, 'a', w[3])
        redis.call('HSET', task_key, 'stream_id', sid)
        redis.call('HDEL', task_key, 'held')
        return
      end
    end
  end
end

-- wake_limited wakes the workers a queue-wide concurrency limit stopped: a
-- claim that found the limit reached set the flag; a release adds one entry
-- to the wake stream their blocking read waits on. Without the flag (the
-- common case) it costs one EXISTS.
local function wake_limited(limits)
  if limits and redis.call('EXISTS', limits.limited) == 1 then
    redis.call('DEL', limits.limited)
    redis.call('XADD', limits.wake, 'MAXLEN', '1', '*', 'w', '1')
  end
end

-- limit_keys completes t, which names freed (the slot release time key,
-- see key_freed), keywait_prefix (key wait list prefix), task_prefix and
-- now (the call's time, text), with the limit keys read from
-- KEYS[keys_at..keys_at+3] (keyrun, held, limited, wake) and the band
-- streams from KEYS[bands_at..bands_at+9] (p0..p9), and returns it.
local function limit_keys(keys_at, bands_at, t)
  local streams = {}
  for i = 0, 9 do streams[i] = KEYS[bands_at + i] end
  t.keyrun, t.held, t.limited, t.wake = KEYS[keys_at], KEYS[keys_at + 1], KEYS[keys_at + 2], KEYS[keys_at + 3]
  t.streams = streams
  return t
end
