-- log_page: a page of an attempt's log lines, oldest first (read only).
--
-- KEYS[1] log: log list of the attempt (see progress.lua: a header
--   "<dropped lines> <stored bytes>", then the lines)
-- ARGV[1] cursor int64: the number of the first line to answer, counted
--   over every line the attempt logged, dropped ones included (0 = from the
--   start)
-- ARGV[2] count int: how many
--
-- Returns: {dropped int, first int, logged int, lines ...string}
-- dropped lines, the number of the first line answered, the lines the
-- attempt logged (dropped ones included), then the lines; an absent log
-- answers {0, 0, 0}. A cursor past the lines logged is none a page
-- answered: the caller refuses it.

local head = redis.call('LINDEX', KEYS[1], 0)
if not head then return {0, 0, 0} end
local d = tonumber(string.match(head, '^(%d+) ')) or 0
local logged = d + redis.call('LLEN', KEYS[1]) - 1
local from = math.max(tonumber(ARGV[1]), d)
local first = from - d + 1
local out = {d, from, logged}
local lines = redis.call('LRANGE', KEYS[1], first, first + tonumber(ARGV[2]) - 1)
for i = 1, #lines do out[#out + 1] = lines[i] end
return out
