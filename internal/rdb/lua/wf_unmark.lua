-- wf_unmark: remove a workflow's attention entry, only if its score is still
-- the one the caller read (compare and remove): a relay that marked it
-- again meanwhile keeps its mark.
--
-- KEYS[1] attention ZSET
-- ARGV[1] workflow id  ARGV[2] the score read (ms)
--
-- Safe to send twice: the second call finds no entry of that score.
--
-- Returns "ok".

local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 'ok'
