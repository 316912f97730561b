-- unregister_queue: take a queue out of the registry and put its number on
-- the free list, from which register_queue hands it out again once it has
-- been free for the quarantine (processes cache numbers for less than it).
--
-- The free list, field "#free" of the registry hash, is a space-separated
-- list of "<number>:<freed at, epoch ms>" entries, oldest first.
--
-- KEYS[1] registry: queue registry hash
-- ARGV[1] queue: queue name
-- ARGV[2] now int64: now (epoch ms)
--
-- The queue's partition map (field "#p:<name>") goes with it: the caller
-- deletes a partitioned queue's other partitions first.
--
-- Returns: int
-- the freed number, or 0 when the queue was not registered.

local num = redis.call('HGET', KEYS[1], ARGV[1])
if not num then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1], '#' .. num, '#p:' .. ARGV[1])
local free = redis.call('HGET', KEYS[1], '#free') or ''
local entry = num .. ':' .. ARGV[2]
if free == '' then
  free = entry
else
  free = free .. ' ' .. entry
end
redis.call('HSET', KEYS[1], '#free', free)
redis.call('HINCRBY', KEYS[1], '#gen', 1)
return tonumber(num)
