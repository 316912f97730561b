-- register_queue: assign a queue its 16-bit registry number, once.
--
-- The registry hash maps <name> -> number and #<number> -> name; the field
-- "#seq" holds the last number handed out. Queue names never start with '#'.
--
-- KEYS[1] queue registry hash
-- ARGV[1] queue name
-- Returns the queue's number, or an error reply when all 65535 are used.

local num = redis.call('HGET', KEYS[1], ARGV[1])
if num then
  return tonumber(num)
end
local next_num = tonumber(redis.call('HGET', KEYS[1], '#seq') or '0') + 1
if next_num > 65535 then
  return redis.error_reply('ERR queue registry is full (65535 queues)')
end
redis.call('HSET', KEYS[1], ARGV[1], next_num, '#' .. next_num, ARGV[1], '#seq', next_num)
return next_num
