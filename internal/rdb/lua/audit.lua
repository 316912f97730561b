-- audit: append one destructive admin action to the capped audit stream.
-- Global key only.
--
-- KEYS[1] audit stream
-- ARGV[1] maxlen  ARGV[2..] field, value pairs (actor, role, action, target,
-- ts, request_id, ...)
--
-- Returns the entry id.

local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
