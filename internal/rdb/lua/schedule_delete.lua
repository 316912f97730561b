-- schedule_delete: remove a schedule and its index entries. Tasks it
-- already made are left alone. Global schedule keys only (one hash tag).
--
-- KEYS[1] def: schedule hash
-- KEYS[2] names: names index
-- KEYS[3] due: due index
-- ARGV[1] name: schedule name
--
-- Returns: int
-- 1 when the schedule existed, 0 when it did not.

local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return existed
