-- wf_ack: delete workflow outbox entries the relay has carried out.
--
-- KEYS[1] outbox: workflow outbox stream
-- ARGV[1..] ids []string: entry ids
--
-- Safe to send twice (a deleted entry is nothing to delete).
--
-- Returns: string
-- "ok".
--
--! include: call_chunked

call_chunked('XDEL', KEYS[1], ARGV)
return 'ok'
