-- wf_mark: put a workflow in the attention index (the sweep finishes what a
-- workflow with an entry older than a few seconds needs) and, when given,
-- in the listing index by its creation time. Both are global keys of one
-- slot (the {_wf} tag).
--
-- KEYS[1] attention ZSET  KEYS[2] optional: listing index ZSET
-- ARGV[1] workflow id  ARGV[2] attention score (ms)  ARGV[3] optional:
-- its listing index score (0), with KEYS[2]
--
-- Safe to send twice (the entry gets the same score again).
--
-- Returns "ok".

redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if KEYS[2] then redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) end
return 'ok'
