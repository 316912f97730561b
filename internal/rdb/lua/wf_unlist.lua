-- wf_unlist: remove workflows whose records are gone (retention ended) from
-- the listing index; a listing that finds one gone calls it.
--
-- KEYS[1] listing index ZSET
-- ARGV[1..] workflow ids
--
-- Safe to send twice (a removed id is nothing to remove).
--
-- Returns "ok".

-- (in chunks: unpack is bounded by Lua's C stack)
for i = 1, #ARGV, 1000 do
  redis.call('ZREM', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return 'ok'
