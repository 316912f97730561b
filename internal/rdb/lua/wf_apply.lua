-- wf_apply: record the end of one node (an entry of its queue's workflow
-- outbox) in its workflow's slot: its status and outcome, the workflow's
-- counts, each dependant's count of deps left (O(1) per dependant), the
-- dependants now resolved (released to run with their deps' outcomes, or
-- cancelled with DependencyFailed when the dep failed and their policy is
-- fail, cascading down), stored as releases to carry out in their slots
-- (wf_release); and, once every node has ended, the workflow's end.
--
-- KEYS[1] workflow: workflow record hash
-- KEYS[2] nodes: nodes hash
-- KEYS[3] releases: releases hash
-- KEYS[4] defs: definitions hash
-- KEYS[5] parked: parked hash
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] ref: ref
-- ARGV[3] status: status the node ended with
-- ARGV[4] result: result JSON ("" = none)
-- ARGV[5] class: error class ("" = none)
-- ARGV[6] retention_ms int64: default retention once finished (ms)
-- ARGV[7] dep_bytes int: bytes of deps' results inlined in a release (see
--   wf_deps_outcomes)
-- ARGV[8] inline int: most releases answered inline
-- ARGV[9] parked_end: "1": the end was parked (wf_park) and leaves the
--   parked hash here
--
-- Idempotent: an entry for a node the workflow knows as ended (applied
-- before, or a DLQ requeue's later end) changes nothing; it answers the
-- releases still stored (or, past ARGV[8] of them, that they are), so that
-- a resend after a lost reply still has them carried out.
--
-- Returns: []string
-- {"gone"} (no such workflow or node) or
-- {state, final, stored, releases...}: state "applied", or "known" for an
-- end the workflow had (a resend, a cascade's cancelled node, a requeued
-- node); final the workflow's status once it has ended, else ""; stored
-- "1" when the releases (known: all stored; applied: this call's) are more
-- than ARGV[8] and none is listed, to be read from the releases hash in
-- chunks, else "0"; each release listed "ref|kind|task id|queue|detail".
--
--! include: wf_ended, wf_end, wf_resolve, wf_finish, wf_outcome

local x = {w = KEYS[1], n = KEYS[2], r = KEYS[3], d = KEYS[4], p = KEYS[5], now = ARGV[1],
  inline = tonumber(ARGV[7])}
local ref, status, ec = ARGV[2], ARGV[3], ARGV[5]
-- A parked end leaves the parked hash once applied, never before: a script
-- that fails part way keeps what it wrote.
local function answer(out)
  if ARGV[9] == '1' then redis.call('HDEL', KEYS[5], ref) end
  return out
end
local v = redis.call('HMGET', KEYS[1], 'status', 'cancel')
local cur = redis.call('HGET', KEYS[2], 's:' .. ref)
if not v[1] or not cur then return answer({'gone'}) end
x.cancel = v[2] == '1'
local function final_status()
  local st = redis.call('HGET', KEYS[1], 'status')
  if st == 'submitting' or st == 'running' then return '' end
  return st
end
if wf_ended[cur] or not wf_ended[status] then
  if redis.call('HLEN', KEYS[3]) > tonumber(ARGV[8]) then return answer({'known', final_status(), '1'}) end
  local out = {'known', final_status(), '0'}
  local all = redis.call('HGETALL', KEYS[3])
  for i = 1, #all, 2 do out[#out + 1] = all[i] .. '|' .. all[i + 1] end
  return answer(out)
end
local forced = status == 'cancelled' and ec ~= 'DependencyFailed' and not x.cancel
wf_end(x, ref, status, wf_outcome(status, ARGV[4], ec), forced)
local rels = {}
wf_resolve(x, {ref, status}, rels)
local final = wf_finish(x, ARGV[6]) or final_status()
if #rels > tonumber(ARGV[8]) then return answer({'applied', final, '1'}) end
local out = {'applied', final, '0'}
for _, rel in ipairs(rels) do out[#out + 1] = rel end
return answer(out)
