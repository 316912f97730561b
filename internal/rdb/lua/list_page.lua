-- list_page: the members of a queue's listing index older than a cursor,
-- newest first (read only).
--
-- KEYS[1] recent: listing index (LIST, newest first: ingest pushes ids as
--   it creates tasks)
-- ARGV[1] cursor: cursor member (an id without its last four digits)
-- ARGV[2] count int: how many
--
-- Returns: []string
-- the members, newest first.
--
-- The list is in creation order, so a binary search over LINDEX finds the
-- first member older than the cursor in ~17 steps for 100,000 ids, with or
-- without the cursor's own id in this list (a listing of every queue pages
-- all of them by one cursor).

local key, cur, count = KEYS[1], ARGV[1], tonumber(ARGV[2])
local lo, hi = 0, redis.call('LLEN', key)
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local v = redis.call('LINDEX', key, mid)
  if v and v >= cur then lo = mid + 1 else hi = mid end
end
return redis.call('LRANGE', key, lo, lo + count - 1)
