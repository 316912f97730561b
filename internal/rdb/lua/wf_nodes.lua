-- wf_nodes: write the nodes of a workflow that live in one queue as tasks in
-- status waiting (not yet released: no stream or schedule entry), in the
-- queue's waiting index (for listings and counts), its listing index and
-- its depth (a node counts as a live task from here on). Each task hash
-- carries wf = "<workflow id>:<ref>"; delay and ttl are kept as offsets
-- from the release (wf_release).
--
-- KEYS[1] waiting: waiting ZSET
-- KEYS[2] depth: depth counter
-- KEYS[3] recent: listing index LIST
-- KEYS[4..] tasks []{task, ended}: per node its task hash and the marker a
--   task deleted at once leaves (TaskEnded)
--
-- ARGV[1] now int64: now (ms)
-- ARGV[2] recent_cap int64: listing index cap
-- ARGV[3..] nodes []{id, wf, type, payload, priority int, max_attempts int, timeout_ms int64, metadata bytes, concurrency_key, retention, keep, delay_ms int64, ttl, created_at int64}:
--   per node its task id, wf, type, payload, priority, max_attempts,
--   timeout_ms, metadata ("" = {}), concurrency key ("" = none), retention
--   once finished (s; "" = the workers' setting), "1" to keep the payload
--   once succeeded, delay after release (ms), ttl after release (ms; "" =
--   none), created_at
--
-- Safe to send twice: a node whose task hash (or ended marker) exists is
-- left as it is, so a resend writes nothing.
--
-- Returns: int
-- the number of nodes that exist now (created or already there).already there).
--
--! include: call_chunked

local n = (#KEYS - 3) / 2
local created, recent = 0, {}
for i = 1, n do
  local tk, ended = KEYS[4 + 2 * (i - 1)], KEYS[5 + 2 * (i - 1)]
  local b = 3 + 14 * (i - 1)
  if redis.call('EXISTS', tk, ended) == 0 then
    local id = ARGV[b]
    local f = {'type', ARGV[b + 2], 'priority', ARGV[b + 4], 'created_at', ARGV[b + 13],
      'max_attempts', ARGV[b + 5], 'attempt', '1', 'timeout_ms', ARGV[b + 6], 'status', 'waiting',
      'wf', ARGV[b + 1], 'payload', ARGV[b + 3]}
    local function opt(k, v) if v ~= '' then f[#f + 1] = k; f[#f + 1] = v end end
    opt('metadata', ARGV[b + 7]); opt('ckey', ARGV[b + 8]); opt('ret', ARGV[b + 9]); opt('keep', ARGV[b + 10])
    if ARGV[b + 11] ~= '0' then opt('dl', ARGV[b + 11]) end
    opt('tl', ARGV[b + 12])
    redis.call('HSET', tk, unpack(f))
    redis.call('ZADD', KEYS[1], ARGV[b + 13], id)
    recent[#recent + 1] = string.sub(id, 1, 28)
    created = created + 1
  end
end
if created > 0 then
  if call_chunked('LPUSH', KEYS[3], recent) > tonumber(ARGV[2]) then
    redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[2]) - 1)
  end
  redis.call('INCRBY', KEYS[2], created)
end
return n
