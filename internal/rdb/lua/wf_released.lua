-- wf_released: drop releases that were carried out (wf_release answered for
-- each) from a workflow's releases hash.
--
-- KEYS[1] releases hash
-- ARGV[1..] refs
--
-- Safe to send twice (a ref already dropped is nothing to drop).
--
-- Returns "ok".

-- (in chunks: unpack is bounded by Lua's C stack)
for i = 1, #ARGV, 1000 do
  redis.call('HDEL', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return 'ok'
