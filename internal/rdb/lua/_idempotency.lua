-- idempotency: reading the owner of an idempotency record.
-- Helpers prepended to the scripts that include them (never run on their own).

-- idem_owner returns the task id an idempotency record names. A record
-- is the task id itself: its state (in progress, or done and replayed) is
-- the task's status, read from the task hash, so no transition rewrites the
-- record. A record of an earlier layout (JSON {task_id, state, updated_at,
-- fingerprint}) is read too; its fingerprint is returned for a task hash
-- that no longer holds one.
local function idem_owner(raw)
  if string.byte(raw, 1) ~= 123 then return raw, nil end -- not '{'
  local ok, rec = pcall(cjson.decode, raw)
  if not ok or type(rec) ~= 'table' or type(rec.task_id) ~= 'string' then return nil, nil end
  return rec.task_id, rec.fingerprint
end
