-- wf_unmark: remove an attention entry (the caller's own, or one the sweep
-- finished), only if its score is still the one the caller wrote or read
-- (compare and remove): an entry marked again meanwhile stays.
--
-- KEYS[1] attention: attention ZSET
-- ARGV[1] member: the entry ("<workflow id>|<token>", see wf_mark)
-- ARGV[2] score int64: the score (ms)
--
-- Safe to send twice: the second call finds no entry of that score.
--
-- Returns: string
-- "ok".

local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 'ok'
