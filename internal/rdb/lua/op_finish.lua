-- op_finish: end an IdempotentOperation claimed with token. mode "done"
-- stores the result for ttl; "extend" renews the running lease; "release"
-- deletes the claim so a later caller may try again. A claim that is no
-- longer ours (lease expired and taken) is left alone.
--
-- KEYS[1] operation: operation hash
-- ARGV[1] token: the claim's token
-- ARGV[2] mode: done | extend | release
-- ARGV[3] ttl_ms int64: ttl (ms)
-- ARGV[4] result bytes: result JSON (done)
--
-- Returns: int
-- 1 when applied, 0 when the claim was not ours any more.

if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
if ARGV[2] == 'done' then
  redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
elseif ARGV[2] == 'extend' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
else
  redis.call('DEL', KEYS[1])
end
return 1
