-- wf_add: add nodes to a running workflow (fan-out from a running node), in
-- the workflow's slot: the graph of the new nodes (their deps' current
-- statuses give each its count of deps left and whether a dep failed; they
-- join their deps' dependants) and their definitions, which the nodes'
-- queues are written from before the batch is activated (wf_start). A node
-- whose ref exists with the same definition digest is no change; another
-- digest refuses the whole call.
--
-- KEYS[1] workflow: workflow record hash
-- KEYS[2] nodes: nodes hash
-- KEYS[3] defs: definitions hash
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] max_nodes int: max nodes of a workflow
-- ARGV[3] full_queue: a queue too full for the call's nodes, as the caller
--   read the depths ("" = none: see wf_create)
-- ARGV[4] full_depth int64: its depth
-- ARGV[5..] nodes packed []{ref, task_id, queue, deps, cont, digest, def bytes}:
--   per node its ref, task id, queue, deps JSON ("" = none), "c" for
--   on_dep_failure continue else "", definition digest, definition JSON
--
-- Safe to send twice: the second call finds every node with its digest and
-- answers the same.
--
-- Returns: []string
-- {"not_found"} | {"not_running", status} | {"mismatch", ref} |
-- {"unknown_dep", ref, dep} | {"too_many", total} |
-- {"queue_full", queue, depth} (a new node, not one added before, goes to
-- the full queue) |
-- {"ok", per node: ref, task id, definition JSON while the node is still
-- being written (not yet activated) else ""}.
--
--! include: packed_argv, wf_ended, wf_list

local A = packed_argv() -- ARGV, its packed tail ARGV[5] laid out in its place
local v = redis.call('HMGET', KEYS[1], 'status', 'cancel', 'nodes')
if not v[1] then return {'not_found'} end
if v[2] == '1' then return {'not_running', 'cancelled'} end
if v[1] ~= 'running' then return {'not_running', v[1]} end
local n = (#A - 4) / 7
local fresh, order = {}, {}
for i = 1, n do
  local b = 5 + 7 * (i - 1)
  local ref = A[b]
  local have = redis.call('HGET', KEYS[2], 'h:' .. ref)
  if have then
    if have ~= A[b + 5] then return {'mismatch', ref} end
  else
    fresh[ref] = b
    order[#order + 1] = ref
  end
end
for _, ref in ipairs(order) do
  local deps = A[fresh[ref] + 3]
  if deps ~= '' then
    for _, d in ipairs(cjson.decode(deps)) do
      if not fresh[d] and redis.call('HEXISTS', KEYS[2], 't:' .. d) == 0 then return {'unknown_dep', ref, d} end
    end
  end
end
local total = tonumber(v[3]) + #order
if total > tonumber(A[2]) then return {'too_many', tostring(total)} end
if A[3] ~= '' then
  for _, ref in ipairs(order) do
    if A[fresh[ref] + 2] == A[3] then return {'queue_full', A[3], A[4]} end
  end
end

local added = {} -- existing dep -> refs of new dependants
local blamed = 0
for _, ref in ipairs(order) do
  local b = fresh[ref]
  local cont = A[b + 4] == 'c'
  local f = {'t:' .. ref, A[b + 1], 'q:' .. ref, A[b + 2], 's:' .. ref, 'waiting', 'h:' .. ref, A[b + 5]}
  local left, failed = 0, false
  if A[b + 3] ~= '' then
    f[#f + 1] = 'd:' .. ref; f[#f + 1] = A[b + 3]
    for _, d in ipairs(cjson.decode(A[b + 3])) do
      local ds = not fresh[d] and redis.call('HGET', KEYS[2], 's:' .. d)
      if not ds or not wf_ended[ds] then
        left = left + 1
      elseif ds ~= 'succeeded' then
        failed = true
        -- Whether d's end fails the workflow depends on its dependants.
        local had = redis.call('HEXISTS', KEYS[2], 'c:' .. d) == 1 or added[d] ~= nil
        local b_now = redis.call('HGET', KEYS[2], 'b:' .. d) == '1'
        if not cont and not b_now then
          redis.call('HSET', KEYS[2], 'b:' .. d, '1'); blamed = blamed + 1
        elseif cont and not had and b_now then
          redis.call('HDEL', KEYS[2], 'b:' .. d); blamed = blamed - 1
        end
      end
      local l = added[d]
      if not l then l = {}; added[d] = l end
      l[#l + 1] = ref
    end
    f[#f + 1] = 'n:' .. ref; f[#f + 1] = left
  end
  if failed then f[#f + 1] = 'f:' .. ref; f[#f + 1] = '1' end
  if cont then f[#f + 1] = 'p:' .. ref; f[#f + 1] = 'c' end
  redis.call('HSET', KEYS[2], unpack(f))
  redis.call('HSET', KEYS[3], ref, A[b + 6])
end
for d, refs in pairs(added) do
  local l = wf_list(KEYS[2], 'c:' .. d)
  for _, r in ipairs(refs) do l[#l + 1] = r end
  redis.call('HSET', KEYS[2], 'c:' .. d, cjson.encode(l))
end
if #order > 0 then
  redis.call('HINCRBY', KEYS[1], 'nodes', #order)
  redis.call('HINCRBY', KEYS[1], 'c:waiting', #order)
  if blamed ~= 0 then redis.call('HINCRBY', KEYS[1], 'blamed', blamed) end
end
local out = {'ok'}
for i = 1, n do
  local b = 5 + 7 * (i - 1)
  local ref = A[b]
  out[#out + 1] = ref
  out[#out + 1] = redis.call('HGET', KEYS[2], 't:' .. ref)
  out[#out + 1] = redis.call('HGET', KEYS[3], ref) or ''
end
return out
