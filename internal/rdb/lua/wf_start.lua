-- wf_start: activate a batch of nodes whose tasks are all written (a
-- submission's nodes, or nodes a running node added): a submitting workflow
-- becomes running; each node of the batch leaves the definitions hash and,
-- when nothing it waits for is left, is released (a release entry to carry
-- out in its own slot, wf_release), or ends cancelled at once when a dep
-- already failed and its policy is fail, or when the workflow is being
-- cancelled. Nothing here writes outside the workflow's slot.
--
-- KEYS[1] workflow: workflow record hash
-- KEYS[2] nodes: nodes hash
-- KEYS[3] releases: releases hash
-- KEYS[4] defs: definitions hash
-- KEYS[5] parked: parked hash
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] retention_ms int64: default retention once finished (ms)
-- ARGV[3] dep_bytes int: bytes of deps' results inlined in a release (see
--   wf_deps_outcomes)
-- ARGV[4] inline int: most releases answered inline
-- ARGV[5..] refs packed []string: refs of the batch
--
-- Safe to send twice: a node already activated (no longer in the
-- definitions hash) is not decided again; the reply lists the batch's
-- releases still stored, so a resend answers what the first run did.
--
-- Returns: []string
-- {"not_found"} or {started, final, stored, releases...}: started
-- "1" while the record does not note WORKFLOW_STARTED as emitted (the
-- caller emits it, then wf_note), final the workflow's status once it has
-- ended, else ""; stored "1" when the batch's releases are more than
-- the inline bound and none is listed (the caller reads them from the releases hash
-- in chunks), else "0"; each release "ref|kind|task id|queue|detail".
--
--! include: packed_argv, wf_decide, wf_resolve, wf_finish, wf_end, wf_release, wf_outcome

local A = packed_argv() -- ARGV, its packed tail ARGV[5] laid out in its place
local x = {w = KEYS[1], n = KEYS[2], r = KEYS[3], d = KEYS[4], p = KEYS[5], now = A[1],
  inline = tonumber(A[3])}
local v = redis.call('HMGET', KEYS[1], 'status', 'cancel', 'ev_s')
if not v[1] then return {'not_found'} end
x.cancel = v[2] == '1'
if v[1] == 'submitting' then redis.call('HSET', KEYS[1], 'status', 'running') end
local todo, rels = {}, {}
for i = 5, #A do
  local ref = A[i]
  if redis.call('HDEL', KEYS[4], ref) == 1 and redis.call('HGET', KEYS[2], 's:' .. ref) == 'waiting' then
    if x.cancel then
      wf_end(x, ref, 'cancelled', wf_outcome('cancelled', nil, 'Cancelled'), false)
      wf_release(x, ref, 'cancel', 'Cancelled', rels)
      todo[#todo + 1] = ref
      todo[#todo + 1] = 'cancelled'
    else
      wf_decide(x, ref, todo, rels)
    end
  end
end
wf_resolve(x, todo, rels)
local final = wf_finish(x, A[2]) or ''
if final == '' then
  local st = redis.call('HGET', KEYS[1], 'status')
  if st ~= 'running' then final = st end
end
local out = {v[3] == '1' and '0' or '1', final, '0'}
-- What is stored for the batch (and whatever this call cascaded to).
local seen = {}
for _, rel in ipairs(rels) do
  local ref = string.match(rel, '^([^|]*)')
  seen[ref] = true
  if redis.call('HEXISTS', KEYS[3], ref) == 1 then out[#out + 1] = rel end
end
for i = 5, #A do
  local ref = A[i]
  if not seen[ref] then
    local rel = redis.call('HGET', KEYS[3], ref)
    if rel then out[#out + 1] = ref .. '|' .. rel end
  end
end
if #out - 3 > tonumber(A[4]) then return {out[1], final, '1'} end
return out
