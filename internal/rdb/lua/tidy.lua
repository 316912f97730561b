-- tidy: keep what finished tasks leave behind from growing with history.
-- It walks the recent index from where the last call stopped and drops the
-- ids whose task hash is gone (their retention ended), and it prunes the
-- retained-count buckets that have ended. Any number of workers may run it:
-- they share the cursor, and each step is idempotent.
--
-- KEYS[1] recent index (ZSET, score 0, ids in time order without their
-- last four digits, the queue's number)
-- KEYS[2] tidy cursor (the last member walked)  KEYS[3] retained counts hash
-- ARGV[1] now (ms)  ARGV[2] task key prefix  ARGV[3] ids per call
-- ARGV[4] the queue's number as the last four digits of its ids
-- ARGV[5] the walk's end: members below it only (the first 12 digits of an
--         id, its creation time: a task created since can still be kept)
--
-- Returns {ids examined, ids dropped, buckets pruned, 1 when the walk
-- reached the end of the index (the next call starts over)}.

local now_s = math.floor(tonumber(ARGV[1]) / 1000)
local max = tonumber(ARGV[3])
local from = redis.call('GET', KEYS[2])
local ids = redis.call('ZRANGEBYLEX', KEYS[1], from and ('(' .. from) or '-', '(' .. ARGV[5], 'LIMIT', 0, max)
local gone = {}
for _, id in ipairs(ids) do
  local full = #id == 28 and (id .. ARGV[4]) or id -- an older version kept whole ids
  if redis.call('EXISTS', ARGV[2] .. full) == 0 then gone[#gone + 1] = id end
end
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
local wrapped = 0
if #ids < max then
  redis.call('DEL', KEYS[2])
  wrapped = 1
else
  redis.call('SET', KEYS[2], ids[#ids], 'EX', 86400)
end

local ended = {}
local counts = redis.call('HGETALL', KEYS[3])
for i = 1, #counts, 2 do
  local at = tonumber(string.match(counts[i], ':(%d+)$') or '0')
  if at <= now_s then ended[#ended + 1] = counts[i] end
end
if #ended > 0 then redis.call('HDEL', KEYS[3], unpack(ended)) end
return {#ids, #gone, #ended, wrapped}
