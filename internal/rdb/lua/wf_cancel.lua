-- wf_cancel: mark a workflow cancelled and list its nodes not ended yet, in
-- the workflow's slot. The caller cancels each node in its own slot (the
-- cancel script: running nodes get a cancel request, the others end
-- cancelled at once); their ends come back through the outbox, and the
-- workflow ends cancelled with its last node. From here on no node is
-- released (see wf_decide) and no node can be added.
--
-- KEYS[1] workflow record hash  KEYS[2] nodes hash
-- ARGV[1] now (ms)
--
-- Safe to send twice: the mark is set once; the list is what is left.
--
-- Returns {"not_found"} | {"terminal", status} |
-- {"cancelling", "ref|task id|queue"...}.
--
--! include: wf_ended

local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'not_found'} end
if st ~= 'submitting' and st ~= 'running' then return {'terminal', st} end
if redis.call('HGET', KEYS[1], 'cancel') ~= '1' then
  redis.call('HSET', KEYS[1], 'cancel', '1', 'cancel_at', ARGV[1])
end
local out = {'cancelling'}
local all = redis.call('HGETALL', KEYS[2])
local node = {}
for i = 1, #all, 2 do
  local kind, ref = string.match(all[i], '^(%a):(.*)$')
  if kind == 's' or kind == 't' or kind == 'q' then
    local m = node[ref]
    if not m then m = {}; node[ref] = m end
    m[kind] = all[i + 1]
  end
end
for ref, m in pairs(node) do
  if not wf_ended[m.s] then out[#out + 1] = ref .. '|' .. m.t .. '|' .. m.q end
end
table.sort(out, function(a, b) if a == 'cancelling' then return true end if b == 'cancelling' then return false end return a < b end)
return out
