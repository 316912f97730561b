-- wf_park: keep a node end the relay could not apply (wf_apply failed) in
-- its workflow's slot, so that the relay can acknowledge it and go on with
-- the entries behind it; the sweep applies it from there (wf_apply with
-- the parked flag, which drops it). A node's first parked end is kept (a
-- later end of the same node is one the workflow would find known). The
-- parked hash expires with the workflow once it has ended.
--
-- KEYS[1] workflow: workflow record hash
-- KEYS[2] parked: parked hash
-- ARGV[1] ref: the node's ref
-- ARGV[2] status: its status
-- ARGV[3] result: result JSON ("" = none)
-- ARGV[4] class: error class ("" = none)
--
-- Safe to send twice (the first end stays).
--
-- Returns: string
-- "ok", or "gone" when the workflow no longer exists.

if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
redis.call('HSETNX', KEYS[2], ARGV[1], cjson.encode({s = ARGV[2], v = ARGV[3], e = ARGV[4]}))
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 'ok'
