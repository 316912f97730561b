-- wf_unlist: remove workflows whose records are gone (retention ended) from
-- the listing index; a listing that finds one gone calls it.
--
-- KEYS[1] index: listing index ZSET
-- ARGV[1..] ids []string: workflow ids
--
-- Safe to send twice (a removed id is nothing to remove).
--
-- Returns: string
-- "ok".
--
--! include: call_chunked

call_chunked('ZREM', KEYS[1], ARGV)
return 'ok'
