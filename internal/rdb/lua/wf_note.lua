-- wf_note: record on a workflow what its caller did outside the workflow's
-- slot: "ev_s" / "ev_e" once WORKFLOW_STARTED / its end event is emitted,
-- "oft" the task id of its on_failure task once submitted, "listed" once it
-- is in the listing index. A record that is gone is left gone.
--
-- KEYS[1] workflow: workflow record hash
-- ARGV[1] field: the field
-- ARGV[2] value: its value
--
-- Safe to send twice (it sets a field).
--
-- Returns: string
-- "ok" or "not_found".

if redis.call('EXISTS', KEYS[1]) == 0 then return 'not_found' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 'ok'
