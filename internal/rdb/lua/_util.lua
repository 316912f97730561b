-- util: small numeric, stream id and hash reading helpers.
-- Helpers prepended to the scripts that include them (never run on their own).

-- later_ms reports whether epoch-ms text a is after b, without turning
-- either into a Lua number (strtod): for digits without leading zeros the
-- longer is larger, and equal lengths compare as text.
local function later_ms(a, b)
  local la, lb = #a, #b
  if la ~= lb then return la > lb end
  return a > b
end

-- int_ge reports whether integer text a is at least b, without turning
-- either into a Lua number (strtod): for digits without leading zeros the
-- longer is larger, and equal lengths compare as text. A negative a (a
-- counter that drifted below zero) is less than any b.
local function int_ge(a, b)
  if string.byte(a, 1) == 45 then return false end -- '-'
  local la, lb = #a, #b
  if la ~= lb then return la > lb end
  return a >= b
end

-- is_terminal reports whether a task status is an end: nothing more happens
-- to the task but its retention.
local function is_terminal(st)
  return st == 'succeeded' or st == 'failed' or st == 'dead_lettered' or st == 'cancelled' or st == 'expired'
end

-- after_id returns the smallest stream id after id ("<ms>-<seq>"): the
-- XTRIM MINID that removes id and everything before it; nil for anything
-- that is not a full stream id.
local function after_id(id)
  local ms, seq = string.match(tostring(id), '^(%d+)-(%d+)$')
  if not ms then return nil end
  return ms .. '-' .. (tonumber(seq) + 1)
end

-- packed_argv returns ARGV with its last argument, a packed tail (a
-- header's "packed" entry: packer in pack.go writes each value as its
-- length, a colon and its bytes), laid out in its place, byte for byte, so
-- that any number of values travels as one argument.
local function packed_argv()
  local last = #ARGV
  local out = {unpack(ARGV, 1, last - 1)}
  local s, pos = ARGV[last], 1
  while pos <= #s do
    local colon = string.find(s, ':', pos, true)
    local len = tonumber(string.sub(s, pos, colon - 1))
    out[#out + 1] = string.sub(s, colon + 1, colon + len)
    pos = colon + len + 1
  end
  return out
end

-- call_chunked calls cmd on key with the values list[first..] appended, at
-- most 1,000 a call (unpack is bounded by Lua's C stack, which fails past
-- about 8,000 values), and returns the last call's reply (nil when there
-- is nothing to send).
local function call_chunked(cmd, key, list, first)
  local reply
  for i = first or 1, #list, 1000 do
    reply = redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
  return reply
end

-- hget_into reads the named fields of a hash into m (absent fields become
-- nil). A hot loop passes one table it refills from task to task: once the
-- table has a slot for every field, refilling allocates nothing, where a
-- fresh table is rehashed four times on the way to 14 fields. Whatever m
-- held before is gone.
local function hget_into(m, key, fields)
  local vals = redis.call('HMGET', key, unpack(fields))
  for i = 1, #fields do
    local v = vals[i]
    if v then m[fields[i]] = v else m[fields[i]] = nil end
  end
  return m
end

-- hgetall_into is hget_into by HGETALL: fields are cleared, then every
-- field of the hash is set. A small hash (a listpack) answers HGETALL in
-- one pass, where HMGET looks up each name from its start; fields the hash
-- has beyond the named ones are left in m too.
local function hgetall_into(m, key, fields)
  for i = 1, #fields do m[fields[i]] = nil end
  local flat = redis.call('HGETALL', key)
  for i = 1, #flat, 2 do m[flat[i]] = flat[i + 1] end
  return m
end

-- flat_map is the field table of a flat HGETALL reply. A script reads a
-- whole hash as a RESP3 map (redis.setresp(3)): Redis hands it the table
-- itself, where Lua would otherwise build it field by field. A server whose
-- scripts answer RESP2 all the same (the in-process Redis of dtq dev) gives
-- the flat reply, and this builds the table: read a hash as
-- `local r = redis.call('HGETALL', key); local h = r.map or flat_map(r)`.
local function flat_map(r)
  local m = {}
  for i = 1, #r, 2 do m[r[i]] = r[i + 1] end
  return m
end

-- hget_map reads the named fields of a hash into a new table.
--! uses: hget_into
local function hget_map(key, fields)
  return hget_into({}, key, fields)
end

local small_ints = {}

-- itoa formats a non-negative integer, remembering the small ones (most
-- durations of short handlers), since Lua formats numbers with sprintf.
--! uses: small_ints
local function itoa(n)
  if n < 4096 then
    local s = small_ints[n]
    if not s then s = tostring(n); small_ints[n] = s end
    return s
  end
  return tostring(n)
end
