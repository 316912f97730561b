-- worker_admit: index a worker id in the workers ZSET (and, for an HTTP
-- worker, in its API key's ZSET, kept in the same Cluster slot), bounding
-- how many ids the indexes hold. An id already indexed is always refreshed,
-- so workers that exist keep beating; a new id is refused once an index is
-- at its limit, after entries that have not beaten since the stale horizon
-- were evicted to make room. Sending it twice answers what the first run
-- answered: the id is then indexed, or the indexes are still full.
--
-- KEYS[1] workers: workers index (ZSET id -> last heartbeat ms)
-- KEYS[2] of_key?: the API key's workers index (same slot as KEYS[1])
-- ARGV[1] now int64: now (ms)
-- ARGV[2] id: worker id
-- ARGV[3] keep_after int64: keep after (ms; older entries are dropped)
-- ARGV[4] stale_before int64: stale before (ms; entries older may be
--   evicted)
-- ARGV[5] max int64: max ids in KEYS[1] (0 = no limit)
-- ARGV[6] max_per_key int64: max ids in KEYS[2] (0 = no limit)
-- ARGV[7] mode: "new" (a registration, bounded) or "seen" (a worker known
--   to hold the id: indexed whatever the bounds)
--
-- Returns: {state string, scope string, count int, limit int, oldest_ms int, evicted ...string}
-- state "ok" (scope "", the numbers 0) or "full": scope "total" | "key",
-- the ids the index holds, its limit and its oldest entry's heartbeat;
-- then the evicted ids, whose records the caller deletes (worker_forget).

local now, id = ARGV[1], ARGV[2]
local keep_after, stale_before = ARGV[3], tonumber(ARGV[4])
local limits = {tonumber(ARGV[5]), tonumber(ARGV[6])}
local scopes = {'total', 'key'}
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. keep_after)
end
local known = redis.call('ZSCORE', KEYS[1], id)
local evicted = {}
if not known and ARGV[7] == 'new' then
  for i = 1, #KEYS do
    local limit = limits[i]
    if limit > 0 and redis.call('ZCARD', KEYS[i]) >= limit then
      -- Room first from records that stopped beating long ago.
      local old = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', '(' .. stale_before, 'LIMIT', 0, 16)
      for _, o in ipairs(old) do
        for j = 1, #KEYS do redis.call('ZREM', KEYS[j], o) end
        evicted[#evicted + 1] = o
      end
      local n = redis.call('ZCARD', KEYS[i])
      if n >= limit then
        local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
        local out = {'full', scopes[i], n, limit, tonumber(oldest[2] or now)}
        for _, e in ipairs(evicted) do out[#out + 1] = e end
        return out
      end
    end
  end
end
redis.call('ZADD', KEYS[1], now, id)
-- A key's index gains only ids admitted above, so it stays within its bound.
if KEYS[2] then
  if known or ARGV[7] ~= 'new' then
    redis.call('ZADD', KEYS[2], 'XX', now, id)
  else
    redis.call('ZADD', KEYS[2], now, id)
  end
end
local out = {'ok', '', 0, 0, 0}
for _, e in ipairs(evicted) do out[#out + 1] = e end
return out
