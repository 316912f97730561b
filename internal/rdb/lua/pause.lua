-- pause: pause or resume a queue. A paused queue delivers nothing; its tasks
-- stay queued. Emits QUEUE_PAUSED / QUEUE_RESUMED only on a change.
--
-- KEYS[1] paused: paused flag
-- KEYS[2] events: event stream
-- ARGV[1] now int64: now (ms)
-- ARGV[2] mode: "pause" | "resume"
-- ARGV[3] events_max_len int64: events maxlen
-- ARGV[4] actor: who asked
--
-- Returns: int
-- 1 when the state changed, 0 when it already was so.
--
--! include: emit

local paused = redis.call('EXISTS', KEYS[1]) == 1
if ARGV[2] == 'pause' then
  if paused then return 0 end
  redis.call('SET', KEYS[1], ARGV[1])
  emit(KEYS[2], ARGV[3], 'QUEUE_PAUSED', '', '', 0, ARGV[1], '', cjson.encode({actor = ARGV[4]}))
else
  if not paused then return 0 end
  redis.call('DEL', KEYS[1])
  emit(KEYS[2], ARGV[3], 'QUEUE_RESUMED', '', '', 0, ARGV[1], '', cjson.encode({actor = ARGV[4]}))
end
return 1
