-- remote_beat: refresh the heartbeat record of an HTTP worker (one that
-- claims through the API). Its tasks in flight are kept in the record as a
-- map task id -> lease end, so several API processes may serve one worker:
-- a claim or heartbeat adds or extends ids, a complete/fail removes them,
-- and ids whose lease ended drop out on the next call. Refuses an id that a
-- live Go worker uses (its record has an instance token). Touches only the
-- worker's own hash; the caller then indexes the worker.
--
-- KEYS[1] worker: worker hash
-- ARGV[1] now int64: now (ms)
-- ARGV[2] mode: claim | beat | done
-- ARGV[3] lease_end int64: lease end (ms) for claim/beat
-- ARGV[4] queues: queues (JSON array; "" = keep)
-- ARGV[5] interval_ms int64: heartbeat interval (ms)
-- ARGV[6] version: version
-- ARGV[7..] ids []string: task ids
--
-- Returns: string
-- "ok" or "duplicate".

local now = tonumber(ARGV[1])
local cur = redis.call('HMGET', KEYS[1], 'instance', 'status', 'last_heartbeat', 'heartbeat_interval_ms', 'leases')
if cur[1] and cur[2] ~= 'stopped'
    and tonumber(cur[3] or '0') > now - 3 * tonumber(cur[4] or '0') then
  return 'duplicate'
end
if cur[1] then redis.call('DEL', KEYS[1]) end -- a stopped Go worker's record
local leases = {}
if cur[5] and not cur[1] then leases = cjson.decode(cur[5]) end
for i = 7, #ARGV do
  if ARGV[2] == 'done' then leases[ARGV[i]] = nil else leases[ARGV[i]] = tonumber(ARGV[3]) end
end
local ids = {}
for id, till in pairs(leases) do
  if till < now then leases[id] = nil else ids[#ids + 1] = id end
end
table.sort(ids)
local in_flight, enc = '[]', '{}'
if #ids > 0 then in_flight = cjson.encode(ids); enc = cjson.encode(leases) end
local status = 'ready'
if #ids > 0 then status = 'busy' end
redis.call('HSETNX', KEYS[1], 'started_at', ARGV[1])
redis.call('HSET', KEYS[1], 'kind', 'http', 'last_heartbeat', ARGV[1],
  'heartbeat_interval_ms', ARGV[5], 'version', ARGV[6], 'status', status, 'in_flight', in_flight, 'leases', enc)
if ARGV[2] == 'claim' then redis.call('HSET', KEYS[1], 'last_claim', ARGV[1]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'queues', ARGV[4]) end
redis.call('EXPIRE', KEYS[1], 86400)
return 'ok'
