-- worker_forget: delete the heartbeat record of a worker that
-- worker_admit evicted from the index, unless it beat again since (a
-- worker that came back keeps its record and is indexed by its next beat).
-- Touches only the worker's hash; sending it twice deletes nothing more.
--
-- KEYS[1] worker: worker hash
-- ARGV[1] stale_before int64: stale before (ms)
--
-- Returns: int
-- 1 when the record was deleted, else 0.

local last = tonumber(redis.call('HGET', KEYS[1], 'last_heartbeat') or '0')
if last < tonumber(ARGV[1]) then
  return redis.call('DEL', KEYS[1])
end
return 0
