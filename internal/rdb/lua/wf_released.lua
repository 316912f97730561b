-- wf_released: drop releases that were carried out (wf_release answered for
-- each) from a workflow's releases hash.
--
-- KEYS[1] releases: releases hash
-- ARGV[1..] refs []string: refs
--
-- Safe to send twice (a ref already dropped is nothing to drop).
--
-- Returns: string
-- "ok".
--
--! include: call_chunked

call_chunked('HDEL', KEYS[1], ARGV)
return 'ok'
