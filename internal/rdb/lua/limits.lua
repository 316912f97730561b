-- limits: replace or remove a queue's flow-control limits (validated by the
-- caller), read by the claim script. Removing a rate limit also drops its
-- state, so a new one starts with a full bucket.
--
-- KEYS[1] limits hash  KEYS[2] rate state
-- ARGV[1] "set" | "delete"
-- ARGV[2..] with "set": field/value pairs (rate_limit, rate_period_ms,
-- burst, concurrency, key_concurrency), only those given
--
-- Returns 1 when limits existed before, else 0.

local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', KEYS[1])
if ARGV[1] == 'set' and #ARGV > 1 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
  if redis.call('HEXISTS', KEYS[1], 'rate_limit') == 0 then redis.call('DEL', KEYS[2]) end
else
  redis.call('DEL', KEYS[2])
end
return existed
