-- scalar: a script with no KEYS and an integer reply.
--
-- ARGV[1] group: consumer group
-- ARGV[2..] ids []string: task ids
--
-- Returns: int
-- how many were removed.

return 0
