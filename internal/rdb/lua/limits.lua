-- limits: replace or remove a queue's flow-control limits (validated by the
-- caller), read by the claim script. Removing a rate limit also drops its
-- state, so a new one starts with a full bucket; so does removing key_rate.
-- Limits without fairness, key_rate and key_order (no field "fair") while
-- the queue had them move every task of the key queues back into its band
-- stream, in key sequence order per band (fair_drain), so none is stranded;
-- limits that turn them on leave the band streams to the claims, which sort
-- their entries into the key queues.
--
-- KEYS[1] limits: limits hash
-- KEYS[2] rate: rate state
-- KEYS[3] fair_state: fair state hash
-- KEYS[4] fair_keys: fair keys ZSET
-- KEYS[5] fair_delay: fair delay ZSET
-- KEYS[6] key_rate: key rate state
-- KEYS[7..16] bands: band streams p0..p9
-- KEYS[17] fair_on: fair flag (ingest reads it)
-- ARGV[1] mode: "set" | "delete"
-- ARGV[2] fair_active: fair active keys prefix
-- ARGV[3] key_queue: key queue prefix
-- ARGV[4] task_prefix: task key prefix
-- ARGV[5..] fields []any: with "set": field/value pairs (rate_limit,
--   rate_period_ms, burst, concurrency, key_concurrency, fair, fair_default,
--   w:<key>, key_rate_limit, key_rate_period_ms, key_burst, key_order,
--   events), only those given; events = "outcomes" (the claim, and the
--   callers of ingest, promote, run_now and wf_release, read it) leaves the
--   non-outcome events out
--
-- Returns: int
-- 1 when limits existed before, else 0.
--
--! include: fair_drain

local existed = redis.call('EXISTS', KEYS[1])
local was_fair = redis.call('HEXISTS', KEYS[1], 'fair') == 1
redis.call('DEL', KEYS[1])
if ARGV[1] == 'set' and #ARGV > 4 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 5))
  if redis.call('HEXISTS', KEYS[1], 'rate_limit') == 0 then redis.call('DEL', KEYS[2]) end
  if redis.call('HEXISTS', KEYS[1], 'key_rate_limit') == 0 then redis.call('DEL', KEYS[6]) end
else
  redis.call('DEL', KEYS[2], KEYS[6])
end
local is_fair = redis.call('HEXISTS', KEYS[1], 'fair') == 1
if is_fair then
  redis.call('SET', KEYS[17], '1')
else
  redis.call('DEL', KEYS[17])
end
if was_fair and not is_fair then
  local streams = {}
  for b = 0, 9 do streams[b] = KEYS[7 + b] end
  fair_drain({state = KEYS[3], keys = KEYS[4], delay = KEYS[5], act_prefix = ARGV[2], kq_prefix = ARGV[3],
    task_prefix = ARGV[4]}, streams)
end
return existed
