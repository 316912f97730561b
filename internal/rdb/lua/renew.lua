-- renew: extend the leases a worker holds, fenced per task on status
-- running + attempt + worker. Also reports cancel requests, so a missed
-- pub/sub message costs at most one heartbeat.
--
-- KEYS[1] lease ZSET
-- ARGV[1] now (ms)  ARGV[2] lease duration (ms)  ARGV[3] worker id
-- ARGV[4] task key prefix  ARGV[5..] pairs of task id, attempt
--
-- Returns one code per task: 0 renewed, 1 lease lost (the handler must stop
-- and write nothing), 2 renewed but a cancel was requested.

local until_ms = tonumber(ARGV[1]) + tonumber(ARGV[2])
local out = {}
for i = 5, #ARGV, 2 do
  local tid, attempt = ARGV[i], ARGV[i + 1]
  local h = hget_map(ARGV[4] .. tid, {'status', 'attempt', 'worker_id', 'cancel_requested'})
  if h.status ~= 'running' or h.attempt ~= attempt or h.worker_id ~= ARGV[3] then
    out[#out + 1] = 1
  else
    redis.call('ZADD', KEYS[1], 'XX', until_ms, tid)
    out[#out + 1] = (h.cancel_requested == '1') and 2 or 0
  end
end
return out
