-- op_claim: start an IdempotentOperation. A finished operation answers its
-- stored result; one running elsewhere answers busy; otherwise the caller
-- gets a short lease (token) while its function runs.
--
-- KEYS[1] operation: operation hash
-- ARGV[1] token: the caller's claim token
-- ARGV[2] lease_ms int64: lease (ms)
--
-- Returns: {state string, result? string}
-- {"done", result} | {"busy"} | {"claimed"}.

local st = redis.call('HMGET', KEYS[1], 'state', 'result')
if st[1] == 'done' then
  return {'done', st[2] or ''}
end
if st[1] == 'running' then
  return {'busy'}
end
redis.call('HSET', KEYS[1], 'state', 'running', 'token', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {'claimed'}
