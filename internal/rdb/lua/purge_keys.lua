-- purge_keys: cancel the queued tasks waiting in one band's key queues
-- (lua/_fair.lua), at most N tasks examined per call: key by key, oldest
-- first, parked keys too. An entry of a task that is no longer queued
-- there is dropped.
--
-- KEYS[1] expiry: expiry ZSET
-- KEYS[2] events: event stream
-- KEYS[3] depth: depth counter
-- KEYS[4] retained: retained counts hash
-- KEYS[5] outbox: workflow outbox stream
-- KEYS[6] fair_state: fair state hash
-- KEYS[7] fair_keys: fair keys ZSET
-- ARGV[1] now int64: now (ms)
-- ARGV[2] band int: band
-- ARGV[3] max int: max tasks
-- ARGV[4] task_prefix: task key prefix
-- ARGV[5] idem_prefix: idempotency key prefix
-- ARGV[6] events_max_len int64: events maxlen
-- ARGV[7] failed_ret_s int64: failed retention (s)
-- ARGV[8] fair_active: fair active keys prefix
-- ARGV[9] key_queue: key queue prefix
--
-- Returns: {cancelled int, more int}
-- more is 1 while the band's key queues hold tasks.
--
--! include: emit, retain, hget_map, wf_outbox, fair_leave

local now = tonumber(ARGV[1])
local b, room = ARGV[2], tonumber(ARGV[3])
local act = ARGV[8] .. b
local F = {state = KEYS[6], keys = KEYS[7]}
local retention = {retained = KEYS[4], idem_prefix = ARGV[5], now = now}
local n = 0
while room > 0 do
  local top = redis.call('ZRANGE', act, 0, 0)
  local k = top[1]
  if not k then break end
  local kq = ARGV[9] .. b .. ':' .. k
  local ids = redis.call('ZRANGE', kq, 0, room - 1)
  if #ids > 0 then redis.call('ZREM', kq, unpack(ids)) end
  for _, tid in ipairs(ids) do
    room = room - 1
    fair_leave(F, b, k)
    local task_key = ARGV[4] .. tid
    local h = hget_map(task_key, {'status', 'stream_id', 'type', 'attempt', 'idem_key', 'ret', 'wf'})
    if h.status == 'queued' and not h.stream_id then
      redis.call('ZREM', KEYS[1], tid)
      redis.call('HSET', task_key, 'status', 'cancelled', 'finished_at', now)
      redis.call('DECR', KEYS[3])
      emit(KEYS[2], ARGV[6], 'TASK_CANCELLED', tid, h.type, h.attempt, now, '', cjson.encode({reason = 'queue purged'}))
      wf_outbox(KEYS[5], h.wf, 'cancelled', '', '')
      retain(retention, task_key, 'cancelled', ARGV[7], h)
      n = n + 1
    end
  end
  if redis.call('EXISTS', kq) == 0 then redis.call('ZREM', act, k) end
end
return {n, redis.call('EXISTS', act)}
