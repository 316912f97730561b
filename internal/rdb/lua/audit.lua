-- audit: append one destructive admin action to the capped audit stream.
-- Global key only.
--
-- KEYS[1] audit: audit stream
-- ARGV[1] max_len int64: maxlen
-- ARGV[2..] fields []any: field, value pairs (actor, role, action, target,
--   ts, request_id, ...)
--
-- Returns: string
-- the entry id.

local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
