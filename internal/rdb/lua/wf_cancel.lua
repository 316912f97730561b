-- wf_cancel: mark a workflow cancelled and list its nodes not ended yet, a
-- page at a time, in the workflow's slot. The caller cancels each node in
-- its own slot (the cancel script: running nodes get a cancel request, the
-- others end cancelled at once); their ends come back through the outbox,
-- and the workflow ends cancelled with its last node. From here on no node
-- is released (see wf_decide) and no node can be added.
--
-- KEYS[1] workflow: workflow record hash
-- KEYS[2] nodes: nodes hash
-- ARGV[1] now int64: now (ms)
-- ARGV[2] cursor: cursor of the nodes hash ("0" = the first page)
-- ARGV[3] count int: HSCAN COUNT of a page (fields of the nodes hash looked
--   at; a node has about ten)
--
-- Safe to send twice: the mark is set once; a page lists what is left of
-- it.
--
-- Returns: []string
-- {"not_found"} | {"terminal", status} |
-- {"cancelling", next cursor ("0" after the last page), "ref|task id|queue"...}.
--
--! include: wf_ended

local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'not_found'} end
if st ~= 'submitting' and st ~= 'running' then return {'terminal', st} end
if redis.call('HGET', KEYS[1], 'cancel') ~= '1' then
  redis.call('HSET', KEYS[1], 'cancel', '1', 'cancel_at', ARGV[1])
end
local page = redis.call('HSCAN', KEYS[2], ARGV[2], 'MATCH', 's:*', 'COUNT', ARGV[3])
local left = {}
for i = 1, #page[2], 2 do
  if not wf_ended[page[2][i + 1]] then
    local ref = string.sub(page[2][i], 3)
    local v = redis.call('HMGET', KEYS[2], 't:' .. ref, 'q:' .. ref)
    left[#left + 1] = ref .. '|' .. v[1] .. '|' .. v[2]
  end
end
table.sort(left)
local out = {'cancelling', page[1]}
for _, n in ipairs(left) do out[#out + 1] = n end
return out
