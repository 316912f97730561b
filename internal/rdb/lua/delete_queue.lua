-- delete_queue: remove an empty queue's structures, or say why it is not
-- empty. A queue is empty when it holds no live task (depth counter,
-- schedule, leases, expiry index, band streams and their delivered entries)
-- and no dead-letter entry. Finished task hashes, results and per-minute
-- stats are left to their TTLs; their retained counts and tidy cursor go. Freeing the registry number is a separate
-- script on the global registry (unregister_queue), run after this one.
--
-- KEYS[1] depth: depth counter
-- KEYS[2] schedule: schedule ZSET
-- KEYS[3] lease: lease ZSET
-- KEYS[4] expiry: expiry ZSET
-- KEYS[5] dlq: dead-letter index
-- KEYS[6] recent: listing index
-- KEYS[7] events: event stream
-- KEYS[8] paused: paused flag
-- KEYS[9..18] bands: band streams p0..p9
-- KEYS[19] retained: retained counts hash
-- KEYS[20] tidy: tidy cursor
-- KEYS[21] number: the queue's number key (a queue created again may get
--   another)
-- KEYS[22] fair_state: fair state hash
-- KEYS[23] fair_keys: fair keys ZSET
-- KEYS[24] fair_delay: fair delay ZSET
-- KEYS[25] key_rate: key rate state (the limits, and so the fair flag, stay)
-- KEYS[26] dedup_counts: dedup counts hash
-- KEYS[27] key_freed: key slot release time
--
-- ARGV[1] group: consumer group name
-- ARGV[2] fair_active: fair active keys prefix
-- ARGV[3] key_queue: key queue prefix
--
-- The key queues (lua/_fair.lua) of an empty queue hold at most entries of
-- finished tasks, which a claim would have dropped: they go too, found
-- through the fair keys ZSET.
--
-- Returns: {deleted int, what? string, count? int}
-- {1} when deleted, or {0, what, count} when not empty, what one of
-- "live", "scheduled", "running", "expiring", "dead_lettered", "ready",
-- "delivered".

local depth = tonumber(redis.call('GET', KEYS[1]) or '0')
if depth > 0 then
  return {0, 'live', depth}
end
local zsets = {{KEYS[2], 'scheduled'}, {KEYS[3], 'running'}, {KEYS[4], 'expiring'}, {KEYS[5], 'dead_lettered'}}
for _, z in ipairs(zsets) do
  local n = redis.call('ZCARD', z[1])
  if n > 0 then
    return {0, z[2], n}
  end
end
for i = 9, 18 do
  local n = redis.call('XLEN', KEYS[i])
  if n > 0 then
    return {0, 'ready', n}
  end
  local ok, pending = pcall(redis.call, 'XPENDING', KEYS[i], ARGV[1])
  if ok and type(pending) == 'table' and tonumber(pending[1]) > 0 then
    return {0, 'delivered', tonumber(pending[1])}
  end
end
for _, k in ipairs(redis.call('ZRANGE', KEYS[23], 0, -1)) do
  for b = 0, 9 do redis.call('DEL', ARGV[3] .. b .. ':' .. k) end
end
for b = 0, 9 do redis.call('DEL', ARGV[2] .. b) end
redis.call('DEL', unpack(KEYS))
return {1}
