-- post.lua: wrk script for bench/wrk.sh: POST /api/v1/tasks with a
-- ~100-byte payload, as the Go scenarios submit.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"task_type":"email.send","payload":{"to":"user@example.com","subject":"hello","body":"' ..
  string.rep("x", 59) .. '"}}'
