-- wf_ack: delete workflow outbox entries the relay has carried out.
--
-- KEYS[1] workflow outbox stream
-- ARGV[1..] entry ids
--
-- Safe to send twice (a deleted entry is nothing to delete).
--
-- Returns "ok".

-- (in chunks: unpack is bounded by Lua's C stack)
for i = 1, #ARGV, 1000 do
  redis.call('XDEL', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return 'ok'
