-- partition_queue: give a new queue its partition map, once.
--
-- A partitioned queue's map is field "#p:<name>" of the registry hash:
-- "<version> <name of partition 1> ... <name of partition P-1>" (partition
-- 0 is the queue's own name). It is written only for a queue the registry
-- does not hold yet, in the same script that checks so: a queue that
-- producers already use with one partition is never split under them.
-- register_queue answers the map with the queue's number.
--
-- KEYS[1] registry: queue registry hash
-- ARGV[1] queue: queue name
-- ARGV[2] map: the partition map to write
--
-- Returns: {created int, partitions string}
-- created is 1 when this call wrote the map (or, sent again, finds the map
-- it wrote); partitions is the map the queue has ("" when the queue exists
-- with one partition).

local field = '#p:' .. ARGV[1]
local have = redis.call('HGET', KEYS[1], field)
if have then
  return {have == ARGV[2] and 1 or 0, have}
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {0, ''}
end
redis.call('HSET', KEYS[1], field, ARGV[2])
redis.call('HINCRBY', KEYS[1], '#gen', 1)
return {1, ARGV[2]}
