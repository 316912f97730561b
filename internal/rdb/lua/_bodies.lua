-- bodies: payload and metadata moving between a task's stream entry and its hash.
-- Helpers prepended to the scripts that include them (never run on their own).

-- entry_body returns the payload and metadata a band stream entry carries
-- (fields t, a, p[, m]: ingest puts a queued task's payload and metadata
-- there, so that its hash stays a listpack), or nil when it carries none.
-- entry_fields is the entry's field list.
local function entry_body(entry_fields)
  if not entry_fields or entry_fields[5] ~= 'p' then return nil end
  if entry_fields[7] == 'm' then return entry_fields[6], entry_fields[8] end
  return entry_fields[6], nil
end

-- keep_body moves the payload and metadata of a queued task's band stream
-- entry into its hash, before the entry goes away (claim, cancel, expiry,
-- purge, hold). entry_fields is the entry's field list when the caller has
-- it; else the entry is read.
--! uses: entry_body
local function keep_body(task_key, stream, sid, entry_fields)
  if not entry_fields then
    if not sid or sid == '' then return end
    local e = redis.call('XRANGE', stream, sid, sid)
    entry_fields = e[1] and e[1][2]
  end
  local p, m = entry_body(entry_fields)
  if p and m then
    redis.call('HSET', task_key, 'payload', p, 'metadata', m)
  elseif p then
    redis.call('HSET', task_key, 'payload', p)
  end
end
