-- post.lua: wrk script for bench/wrk.sh: POST /api/v1/tasks with a
-- ~100-byte payload, as the Go scenarios submit. Given "keyed" (wrk ... --
-- keyed), each request carries an Idempotency-Key of its own, and the
-- payload's keys are out of sorted order, as most languages' encoders
-- write them.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"task_type":"email.send","payload":{"to":"user@example.com","subject":"hello","body":"' ..
  string.rep("x", 59) .. '"}}'

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local keyed, sent = false, 0
local headers = {["Content-Type"] = "application/json"}

function init(args)
  keyed = args[1] == "keyed"
end

function request()
  if not keyed then
    return wrk.format()
  end
  sent = sent + 1
  headers["Idempotency-Key"] = "k-" .. tid .. "-" .. sent
  return wrk.format(nil, nil, headers)
end
