-- wf_mark: put a workflow in the attention index (the sweep finishes what a
-- workflow with an entry older than a few seconds needs) and, when given,
-- in the listing index by its creation time. Both are global keys of one
-- slot (the {_wf} tag).
--
-- Each marking call has an entry of its own ("<workflow id>|<token>"), so
-- that a call that removes its entry once its steps are done (wf_unmark)
-- never removes the entry of another call whose steps were cut short.
--
-- KEYS[1] attention: attention ZSET
-- KEYS[2] index?: listing index ZSET
-- ARGV[1] member: the attention entry
-- ARGV[2] score int64: its score (ms)
-- ARGV[3] id?: the workflow id, put in the listing index (score 0), sent
--   with the index
--
-- Safe to send twice (the entry gets the same score again).
--
-- Returns: string
-- "ok".

redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if KEYS[2] then redis.call('ZADD', KEYS[2], 0, ARGV[3]) end
return 'ok'
