-- progress: record a running attempt's progress and append its log lines,
-- fenced on status running + attempt + worker (+ the claim nonce the
-- attempt was started with, when one is given). A stale attempt writes
-- nothing. Each write of an attempt carries a sequence number, increasing
-- per attempt; a write whose number is not above the last one applied (a
-- call sent again after its reply was lost) writes nothing and answers
-- what the last one answered, so no line lands twice. A sequence number of 0 is the next one: such a
-- write is not checked (a writer that numbers none relies on the least
-- interval instead).
--
-- The log of an attempt is one LIST: its first element is a header
-- "<dropped lines> <stored bytes>", then the lines oldest first, each
-- "<ms since the time in the task id> <line>". The newest lines are kept:
-- past cap lines or cap bytes the oldest go and are counted as dropped. The
-- task hash records, for retention (retain in _retention.lua), the highest
-- attempt that logged (lg), and the last write applied (pq = "<claim
-- nonce of the run>:<seq>:<ms>:<lines it dropped>").
--
-- KEYS[1] task: task hash
-- KEYS[2] log: log list of the attempt
-- KEYS[3] events: event stream
-- ARGV[1] now int64: now (ms)
-- ARGV[2] id: task id
-- ARGV[3] attempt int: attempt
-- ARGV[4] worker_id: worker id
-- ARGV[5] claim: claim nonce ("" = not checked)
-- ARGV[6] seq int64: sequence number
-- ARGV[7] progress: progress JSON ("" = unchanged)
-- ARGV[8] events_max_len int64: events maxlen
-- ARGV[9] cap_lines int: cap lines
-- ARGV[10] cap_bytes int: cap bytes
-- ARGV[11] interval_ms int64: least time between two writes of a run (ms;
--   0 = any)
-- ARGV[12] dropped int64: lines the writer dropped before sending (oldest,
--   over the cap)
-- ARGV[13..] lines []string: log entries, oldest first
--
-- Returns: {code int, n int}
-- code 1 written (n: lines this write dropped; a write sent again answers
-- the same), 0 lease lost (nothing written), 3 too soon after the run's
-- last write (nothing written; n: ms until one may land).
--
--! include: hget_map, emit, call_chunked

local tid, attempt, worker, claim = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local seq = tonumber(ARGV[6])
local h = hget_map(KEYS[1], {'status', 'attempt', 'worker_id', 'claim', 'type', 'pq', 'lg'})
if h.status ~= 'running' or h.attempt ~= attempt or h.worker_id ~= worker
    or (claim ~= '' and h.claim ~= claim) then
  return {0, 0}
end
-- The run is named by the nonce of the claim that started it: an attempt
-- handed back at shutdown runs again under the same number.
local run = h.claim or ''
local now = tonumber(ARGV[1])
local seq_s = ARGV[6]
if h.pq then
  local c, s, at, dr = string.match(h.pq, '^(.*):(%d+):(%d+):(%d+)$')
  if c == run then
    if seq > 0 and tonumber(s) >= seq then return {1, tonumber(dr)} end
    local wait = tonumber(at) + tonumber(ARGV[11]) - now
    if wait > 0 then return {3, wait} end
    if seq == 0 then seq_s = string.format('%d', tonumber(s) + 1) end
  end
end
if seq == 0 and seq_s == '0' then seq_s = '1' end
local set = {'pq', false}
if ARGV[7] ~= '' then
  set[#set + 1] = 'progress'; set[#set + 1] = ARGV[7]
  set[#set + 1] = 'progress_at'; set[#set + 1] = ARGV[1]
end
local out = {1, 0}
local dropped = tonumber(ARGV[12])
if #ARGV >= 13 or dropped > 0 then
  local cap_lines, cap_bytes = tonumber(ARGV[9]), tonumber(ARGV[10])
  local key = KEYS[2]
  local old = redis.call('LPOP', key) -- the header
  local d, b = 0, 0
  if old then
    local a1, a2 = string.match(old, '^(%d+) (%d+)$')
    d, b = tonumber(a1) or 0, tonumber(a2) or 0
  end
  local n = redis.call('LLEN', key)
  -- Of the new entries, those that alone pass a cap never land.
  local first, kept, kb = 13, 0, 0
  for i = #ARGV, 13, -1 do
    local len = #ARGV[i]
    if kept + 1 > cap_lines or kb + len > cap_bytes then first = i + 1; break end
    kept = kept + 1; kb = kb + len
  end
  local skipped = first - 13
  -- Then the oldest stored lines make room for them.
  local popped = 0
  while n > 0 and (n + kept > cap_lines or b + kb > cap_bytes) do
    local v = redis.call('LPOP', key)
    n = n - 1; b = b - #v; popped = popped + 1
  end
  local now_dropped = dropped + skipped + popped
  d = d + now_dropped
  call_chunked('RPUSH', key, ARGV, first)
  b = b + kb
  redis.call('LPUSH', key, d .. ' ' .. b)
  if not h.lg or tonumber(h.lg) < tonumber(attempt) then
    set[#set + 1] = 'lg'; set[#set + 1] = attempt
  end
  out[2] = now_dropped
end
set[2] = run .. ':' .. seq_s .. ':' .. ARGV[1] .. ':' .. out[2]
redis.call('HSET', KEYS[1], unpack(set))
if ARGV[7] ~= '' then
  emit(KEYS[3], ARGV[8], 'TASK_PROGRESS', tid, h.type, attempt, ARGV[1], worker, '{"progress":' .. ARGV[7] .. '}')
end
return out
