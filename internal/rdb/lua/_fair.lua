-- fair: the key queues of a queue with fairness, key_order or key_rate set
-- (docs/flow-control.md, "Key queues"). Helpers prepended to the scripts that
-- include them (never run on their own).
--
-- Per band b, a queued task of key k (keyless tasks form the key "") waits
-- in the ZSET kq_prefix .. b .. ':' .. k, scored by its key sequence
-- number (kseq, taken from the state hash's counter "seq"), and the keys
-- with queued tasks are the members of act_prefix .. b, scored by their
-- pass (stride scheduling: a start of key k adds 1e6/weight(k)). A parked
-- key (at its key_concurrency, or waiting for its key_rate token) has the
-- score +inf there until it is unparked. The state hash holds "seq", per
-- band "vt<b>" (the pass of the key picked last: a key that becomes active
-- joins there, so it cannot bank turns while idle) and "n<b>" (tasks in
-- the band's key queues); the keys ZSET counts each key's queued tasks.
--
-- F: state, keys, delay, act_prefix, kq_prefix, task_prefix, vt (a cache).

-- fair_vt is band b's virtual time, read once per call.
local function fair_vt(F, b)
  local v = F.vt[b]
  if v == nil then
    v = redis.call('HGET', F.state, 'vt' .. b) or '0'
    F.vt[b] = v
  end
  return v
end

-- fair_enter puts queued task tid of key k in its key queue of band b with
-- sequence number seq, and makes k active unless it is active or parked. A
-- task already there only takes the new number: it is counted once.
--! uses: fair_vt
local function fair_enter(F, b, tid, k, seq)
  if redis.call('ZADD', F.kq_prefix .. b .. ':' .. k, seq, tid) == 1 then
    redis.call('HINCRBY', F.state, 'n' .. b, 1)
    redis.call('ZINCRBY', F.keys, 1, k)
  end
  redis.call('ZADD', F.act_prefix .. b, 'NX', fair_vt(F, b), k)
end

-- fair_leave counts out a task taken from key k's queue of band b.
local function fair_leave(F, b, k)
  redis.call('HINCRBY', F.state, 'n' .. b, -1)
  if tonumber(redis.call('ZINCRBY', F.keys, -1, k)) <= 0 then
    redis.call('ZREM', F.keys, k)
  end
end

-- fair_unpark makes parked key k of band b active again, at the band's
-- virtual time; a key that is not parked is left as it is.
--! uses: fair_vt
local function fair_unpark(F, b, k)
  if redis.call('ZSCORE', F.act_prefix .. b, k) == 'inf' then
    redis.call('ZADD', F.act_prefix .. b, 'XX', fair_vt(F, b), k)
  end
end

-- fair_drain moves every task of the key queues back to its band stream
-- (streams: band -> key), in key sequence order per band, and removes the
-- key queues: fairness was switched off. Only tasks still queued and not
-- already in a stream get an entry; the payload stays in the hash.
local function fair_drain(F, streams)
  local per_band = {}
  for b = 0, 9 do per_band[b] = {} end
  for _, k in ipairs(redis.call('ZRANGE', F.keys, 0, -1)) do
    for b = 0, 9 do
      local kq = F.kq_prefix .. b .. ':' .. k
      local flat = redis.call('ZRANGE', kq, 0, -1, 'WITHSCORES')
      for i = 1, #flat, 2 do
        local list = per_band[b]
        list[#list + 1] = {tonumber(flat[i + 1]), flat[i]}
      end
      redis.call('DEL', kq)
    end
  end
  local moved = 0
  for b = 0, 9 do
    local list = per_band[b]
    table.sort(list, function(x, y) return x[1] < y[1] end)
    for _, e in ipairs(list) do
      local task_key = F.task_prefix .. e[2]
      local w = redis.call('HMGET', task_key, 'status', 'attempt', 'stream_id')
      if w[1] == 'queued' and not w[3] then
        local sid = redis.call('XADD', streams[b], '*', 't', e[2], 'a', w[2])
        redis.call('HSET', task_key, 'stream_id', sid)
        moved = moved + 1
      end
    end
    redis.call('DEL', F.act_prefix .. b)
    redis.call('HDEL', F.state, 'vt' .. b, 'n' .. b)
  end
  redis.call('DEL', F.keys, F.delay)
  return moved
end
