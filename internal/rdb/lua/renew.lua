-- renew: extend the leases a worker holds, fenced per task on status
-- running + attempt + worker (+ the claim nonce the task was started with,
-- when one is given: a remote worker's lease token names its claim). Also
-- reports cancel requests, so a missed pub/sub message costs at most one
-- heartbeat.
--
-- KEYS[1] lease: lease ZSET
-- ARGV[1] now int64: now (ms)
-- ARGV[2] lease_ms int64: lease duration (ms)
-- ARGV[3] worker_id: worker id
-- ARGV[4] task_prefix: task key prefix
-- ARGV[5] claim: claim nonce ("" = not checked)
-- ARGV[6..] tasks []{id, attempt int}: pairs of task id, attempt
--
-- Returns: []int
-- one code per task: 0 renewed, 1 lease lost (the handler must stop and
-- write nothing), 2 renewed but a cancel was requested.
--
--! include: hget_map

local until_ms = tonumber(ARGV[1]) + tonumber(ARGV[2])
local claim = ARGV[5]
local fields = {'status', 'attempt', 'worker_id', 'cancel_requested'}
if claim ~= '' then fields[5] = 'claim' end
local out = {}
for i = 6, #ARGV, 2 do
  local tid, attempt = ARGV[i], ARGV[i + 1]
  local h = hget_map(ARGV[4] .. tid, fields)
  if h.status ~= 'running' or h.attempt ~= attempt or h.worker_id ~= ARGV[3]
      or (claim ~= '' and h.claim ~= claim) then
    out[#out + 1] = 1
  else
    redis.call('ZADD', KEYS[1], 'XX', until_ms, tid)
    out[#out + 1] = (h.cancel_requested == '1') and 2 or 0
  end
end
return out
