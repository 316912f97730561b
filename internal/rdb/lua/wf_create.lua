-- wf_create: the first write of a workflow submission, in the workflow's slot:
-- the idempotency check in the workflow space, then the record (status
-- submitting), its nodes' graph and their definitions (which the nodes'
-- queues are written from, by the submitter or by the sweep).
--
-- KEYS[1] workflow: workflow record hash
-- KEYS[2] nodes: nodes hash
-- KEYS[3] defs: definitions hash
-- KEYS[4] idem?: the idempotency record (Keys.WorkflowIdempotency)
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] id: workflow id
-- ARGV[3] name: workflow name
-- ARGV[4] fingerprint: fingerprint
-- ARGV[5] idem_ttl_s int64: idempotency record TTL (s)
-- ARGV[6] on_failure: on_failure definition JSON ("" = none)
-- ARGV[7] retention: longest node retention (s; "" = the default)
-- ARGV[8] idem_key: idempotency key ("" = none)
-- ARGV[9] workflow_prefix: workflow key prefix (Keys.WorkflowPrefix: an
--   owner's record is the prefix and its id)
-- ARGV[10] full_queue: a queue too full for this workflow's nodes, as the
--   submitter read the depths ("" = none)
-- ARGV[11] full_depth int64: that queue's depth
-- ARGV[12..] nodes packed []{ref, task_id, queue, deps, dependants, cont, digest, def bytes}:
--   per node its ref, task id, queue, deps JSON ("" = none), dependants
--   JSON ("" = none), "c" for on_dep_failure continue else "", definition
--   digest, definition JSON
--
-- Safe to send twice: a record this call created (its idempotency record
-- names it, or the record exists) answers {"created", status} again and
-- writes nothing.
--
-- A full queue refuses the workflow after the idempotency check (a keyed
-- resubmission still gets its workflow) and writes nothing.
--
-- Returns: []string
-- {"created", status} | {"in_progress", id} | {"mismatch", id} |
-- {"duplicate", id, status} | {"queue_full", queue, depth}.
--
--! include: packed_argv

local A = packed_argv() -- ARGV, its packed tail ARGV[12] laid out in its place
local id = A[2]
if KEYS[4] then
  local raw = redis.call('GET', KEYS[4])
  if raw and raw ~= id then
    local o = redis.call('HMGET', A[9] .. raw, 'status', 'fp')
    if o[1] then
      if o[2] ~= A[4] then return {'mismatch', raw} end
      if o[1] == 'submitting' or o[1] == 'running' then return {'in_progress', raw} end
      return {'duplicate', raw, o[1]}
    end
    -- a stale record: its workflow is gone; this submission is new work
  end
end
local st = redis.call('HGET', KEYS[1], 'status')
if st then return {'created', st} end
if A[10] ~= '' then return {'queue_full', A[10], A[11]} end
if KEYS[4] then redis.call('SET', KEYS[4], id, 'EX', A[5]) end

local n = (#A - 11) / 8
local w = {'status', 'submitting', 'created_at', A[1], 'nodes', n, 'ended', 0, 'c:waiting', n}
local function opt(f, v) if v ~= '' then w[#w + 1] = f; w[#w + 1] = v end end
opt('name', A[3]); opt('fp', A[4]); opt('of', A[6]); opt('ret', A[7]); opt('idem', A[8])
redis.call('HSET', KEYS[1], unpack(w))
for i = 1, n do
  local b = 12 + 8 * (i - 1)
  local ref = A[b]
  local deps = A[b + 3]
  local f = {'t:' .. ref, A[b + 1], 'q:' .. ref, A[b + 2], 's:' .. ref, 'waiting', 'h:' .. ref, A[b + 6]}
  if deps ~= '' then
    f[#f + 1] = 'd:' .. ref; f[#f + 1] = deps
    f[#f + 1] = 'n:' .. ref; f[#f + 1] = #cjson.decode(deps)
  end
  if A[b + 4] ~= '' then f[#f + 1] = 'c:' .. ref; f[#f + 1] = A[b + 4] end
  if A[b + 5] == 'c' then f[#f + 1] = 'p:' .. ref; f[#f + 1] = 'c' end
  redis.call('HSET', KEYS[2], unpack(f))
  redis.call('HSET', KEYS[3], ref, A[b + 7])
end
return {'created', 'submitting'}
