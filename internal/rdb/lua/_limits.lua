-- limits: concurrency-key slots given back and limited workers woken.
-- Helpers prepended to the scripts that include them (never run on their own).

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
