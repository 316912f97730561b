-- tidy: keep what finished tasks leave behind from growing with history.
-- It walks the listing index from its oldest end, resuming where the last
-- call stopped, and drops the ids whose task hash is gone (their retention
-- ended), and it prunes the retained-count buckets that have ended. Any
-- number of workers may run it: they share the cursor, and each step is
-- idempotent.
--
-- KEYS[1] recent: listing index (LIST, newest first, ids without their
--   last four digits, the queue's number)
-- KEYS[2] cursor: tidy cursor (how many ids from the oldest end the walk
--   has passed)
-- KEYS[3] retained: retained counts hash
-- ARGV[1] now int64: now (ms)
-- ARGV[2] task_prefix: task key prefix
-- ARGV[3] batch int: ids per call
-- ARGV[4] suffix: the queue's number as the last four digits of its ids
-- ARGV[5] end: the walk's end: members below it only (the first 12 digits
--   of an id, its creation time: a task created since can still be kept)
--
-- Gone ids are overwritten with '' (LSET) and removed with one LREM from
-- the oldest end, which stops after the last of them: the cost is the
-- walk's distance from that end, not the list's length.
--
-- Returns: {examined int, dropped int, pruned int, wrapped int}
-- ids examined, ids dropped, buckets pruned, 1 when the walk reached the
-- end of the index (the next call starts over).

local now_s = math.floor(tonumber(ARGV[1]) / 1000)
local max = tonumber(ARGV[3])
local from = tonumber(redis.call('GET', KEYS[2]) or '0')
-- LRANGE from the oldest end: index -1 is the oldest id.
local ids = redis.call('LRANGE', KEYS[1], -(from + max), -(from + 1))
local examined, gone, reached = 0, 0, #ids < max
for i = #ids, 1, -1 do
  local id = ids[i]
  if string.sub(id, 1, 12) >= ARGV[5] then
    reached = true -- younger than any retention: the rest is newer still
    break
  end
  examined = examined + 1
  if redis.call('EXISTS', ARGV[2] .. id .. ARGV[4]) == 0 then
    redis.call('LSET', KEYS[1], -(from + examined), '')
    gone = gone + 1
  end
end
if gone > 0 then redis.call('LREM', KEYS[1], -gone, '') end
local wrapped = 0
if reached then
  redis.call('DEL', KEYS[2])
  wrapped = 1
else
  redis.call('SET', KEYS[2], from + examined - gone, 'EX', 86400)
end

local ended = {}
local counts = redis.call('HGETALL', KEYS[3])
for i = 1, #counts, 2 do
  local at = tonumber(string.match(counts[i], ':(%d+)$') or '0')
  if at <= now_s then ended[#ended + 1] = counts[i] end
end
if #ended > 0 then redis.call('HDEL', KEYS[3], unpack(ended)) end
return {examined, gone, #ended, wrapped}
