-- dedup: the records of deduplication keys (docs/deduplication.md).
-- Helpers prepended to the scripts that include them (never run on their own).
--
-- A key's record is a HASH (keys.go Dedup: the queue's slot) with id (the
-- key's newest task), m (the mode that wrote it) and, for debounce, f (the
-- first submission's time, ms). While a keep_last task waits behind a
-- running one, the record also holds run (the running task), w (the
-- queue's waiting ZSET) and s (its schedule ZSET): id is then the waiting
-- task. A throttle record expires at the end of its ttl; the others live
-- until their task ends (or their own ttl, when one was given). A task of a
-- key names its record in its hash (field dk), so that every way a task
-- ends can release the key.

-- dedup_end releases what task tid (hash task_key) holds in record dk now
-- that it ended with status, or was dead-lettered (a task waiting behind it
-- must not wait for the DLQ). A record that names another task is left
-- alone: the key moved on. A throttle key stays held until its ttl ends,
-- unless the task never ran (cancelled, expired). A keep_last task waiting
-- behind tid is made due now (pending, scheduled at now: the promoter
-- queues it). Returns how long (ms) the key stays held by tid: a throttle
-- key's time left, else 0.
local function dedup_end(dk, task_key, tid, status, now)
  local r = redis.call('HMGET', dk, 'id', 'm', 'run', 'w', 's')
  if r[3] and r[3] == tid then
    local wid = r[1]
    local wk = string.sub(task_key, 1, -33) .. wid
    local w = redis.call('HMGET', wk, 'status', 'available_at')
    if w[1] == 'waiting' then
      -- (due at once, or when the delay it was submitted with ends)
      local due = now
      if w[2] and tonumber(w[2]) > tonumber(now) then due = w[2] end
      redis.call('ZREM', r[4], wid)
      redis.call('HSET', wk, 'status', 'pending', 'available_at', due)
      redis.call('ZADD', r[5], due, wid)
    end
    redis.call('HDEL', dk, 'run', 'w', 's')
    return 0
  end
  if r[1] ~= tid then return 0 end
  if r[3] then
    -- The task waiting behind a running one ended first (cancelled,
    -- expired): the running one holds the key again.
    redis.call('ZREM', r[4], tid)
    redis.call('HSET', dk, 'id', r[3])
    redis.call('HDEL', dk, 'run', 'w', 's')
    return 0
  end
  if r[2] == 'throttle' and status ~= 'cancelled' and status ~= 'expired' then
    return redis.call('PTTL', dk)
  end
  redis.call('DEL', dk)
  return 0
end
