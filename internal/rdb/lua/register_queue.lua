-- register_queue: assign a queue its 16-bit registry number, once.
--
-- The registry hash maps <name> -> number and #<number> -> name; the field
-- "#seq" holds the last number handed out and "#free" the numbers of
-- deleted queues (see unregister_queue), reused once their quarantine has
-- passed; "#gen" counts the changes to the names (a reader re-reads the
-- hash only when it moved: RDB.Queues). Queue names never start with '#'.
--
-- A queue's number is also kept in the queue's own slot (Keys.QueueNum,
-- written once by the caller and checked by ingest). The caller passes it
-- in ARGV[5]: the registry then holds exactly that number for the queue,
-- restoring an entry a lost or re-created registry no longer has, so a
-- queue is never given a number other than the one its task ids carry.
--
-- KEYS[1] registry: queue registry hash
-- ARGV[1] queue: queue name
-- ARGV[2] now int64: now (epoch ms)
-- ARGV[3] quarantine_ms int64: quarantine of a freed number (ms)
-- ARGV[4] register: "1" to register a new queue, "0" to look up only
-- ARGV[5] number: the queue's number from its number key, "" when it has
--   none
--
-- Returns: {number int, registered int, partitions string}
-- registered is 1 when registered or restored by this call, else 0;
-- partitions is the queue's partition map (field "#p:<name>", written by
-- partition_queue), "" for a queue of one partition: read in the same call
-- as the number, so a process never knows a queue's number without its
-- partitions. {0, 0, ""} when the queue is unknown and ARGV[4] is "0"; an
-- error reply when all 65535 numbers are used, or when ARGV[5]'s number
-- names another queue.

local num = redis.call('HGET', KEYS[1], ARGV[1])
local parts = redis.call('HGET', KEYS[1], '#p:' .. ARGV[1]) or ''
local want = ARGV[5]
if want ~= '' then
  if num == want then
    return {tonumber(num), 0, parts}
  end
  local holder = redis.call('HGET', KEYS[1], '#' .. want)
  if holder and holder ~= ARGV[1] then
    return redis.error_reply('ERR queue number conflict: ' .. want .. ' names ' .. holder)
  end
  if num and redis.call('HGET', KEYS[1], '#' .. num) == ARGV[1] then
    redis.call('HDEL', KEYS[1], '#' .. num)
  end
  -- a restored number is no longer free, and later numbers come after it
  local free = redis.call('HGET', KEYS[1], '#free')
  if free and free ~= '' then
    local kept = {}
    for item in string.gmatch(free, '[^ ]+') do
      if string.match(item, '^(%d+):') ~= want then
        kept[#kept + 1] = item
      end
    end
    redis.call('HSET', KEYS[1], '#free', table.concat(kept, ' '))
  end
  if tonumber(redis.call('HGET', KEYS[1], '#seq') or '0') < tonumber(want) then
    redis.call('HSET', KEYS[1], '#seq', want)
  end
  redis.call('HSET', KEYS[1], ARGV[1], want, '#' .. want, ARGV[1])
  redis.call('HINCRBY', KEYS[1], '#gen', 1)
  return {tonumber(want), 1, parts}
end
if num then
  return {tonumber(num), 0, parts}
end
if ARGV[4] ~= '1' then
  return {0, 0, ''}
end
local next_num
local free = redis.call('HGET', KEYS[1], '#free')
if free and free ~= '' then
  local first = string.match(free, '^[^ ]+')
  local n, freed_at = string.match(first, '^(%d+):(%d+)$')
  if n and tonumber(freed_at) + tonumber(ARGV[3]) <= tonumber(ARGV[2]) then
    next_num = tonumber(n)
    redis.call('HSET', KEYS[1], '#free', string.sub(free, string.len(first) + 2))
  end
end
if not next_num then
  next_num = tonumber(redis.call('HGET', KEYS[1], '#seq') or '0') + 1
  if next_num > 65535 then
    return redis.error_reply('ERR queue registry is full (65535 queues)')
  end
  redis.call('HSET', KEYS[1], '#seq', next_num)
end
redis.call('HSET', KEYS[1], ARGV[1], next_num, '#' .. next_num, ARGV[1])
redis.call('HINCRBY', KEYS[1], '#gen', 1)
return {next_num, 1, parts}
