-- workflow: a workflow node's end into its queue's outbox; the workflow slot's
-- bookkeeping of node ends, dependants and the workflow's own end.
-- Helpers prepended to the scripts that include them (never run on their own).
--
-- The workflow slot (see docs/workflows-internals.md) holds the record hash W, the
-- nodes hash N (per node ref: t: task id, q: queue, d: deps, c: dependants,
-- n: deps not ended, p: "c" for on_dep_failure continue, s: status as the
-- workflow knows it, f: a dep ended other than succeeded, o: the node's
-- outcome once ended, b: the node's end fails the workflow, h: its
-- definition's digest), the definitions hash D (nodes being written), the
-- releases hash R (ref -> "kind|task id|queue|deps outcomes or error
-- class", carried out in the nodes' own slots) and the parked hash P (ref
-- -> "status|error class|result": a node end the relay could not apply,
-- left to the sweep).

-- wf_outbox appends the end of a workflow node to its queue's workflow
-- outbox, in the script that ends it. wf is the task's wf field
-- ("<workflow id>:<ref>"); a task without one (nil) costs nothing more.
local function wf_outbox(outbox, wf, status, result, err_class)
  if not wf then return end
  redis.call('XADD', outbox, '*', 'w', wf, 's', status, 'v', result or '', 'e', err_class or '')
end

local wf_ended = {succeeded = true, failed = true, dead_lettered = true, cancelled = true, expired = true}

-- wf_outcome is the JSON a dependant reads of an ended node: its status and
-- its result (succeeded) or error class.
local function wf_outcome(status, result, err_class)
  if status == 'succeeded' then
    return '{"status":"succeeded","result":' .. ((result and result ~= '') and result or 'null') .. '}'
  end
  if err_class and err_class ~= '' then
    return '{"status":"' .. status .. '","error_class":' .. cjson.encode(err_class) .. '}'
  end
  return '{"status":"' .. status .. '"}'
end

-- wf_list decodes a JSON list of refs kept in field of hash key ({} when
-- absent).
local function wf_list(key, field)
  local raw = redis.call('HGET', key, field)
  if not raw or raw == '' then return {} end
  return cjson.decode(raw)
end

-- wf_deps_outcomes is the deps' outcomes of node ref as one JSON object,
-- {ref: outcome}, built from the stored outcomes without decoding them.
-- Results are inlined while their total stays within x.inline bytes; from
-- the first that does not fit on, a succeeded dep with a result reads
-- {"status":"succeeded","task_id":...,"result_omitted":true} (the result
-- stays readable on the dep's task), so that a wide join's deps stay
-- bounded whatever its deps returned.
--! uses: wf_list
local function wf_deps_outcomes(x, ref)
  local parts, size, full = {}, 0, false
  local head = '{"status":"succeeded","result":'
  for _, d in ipairs(wf_list(x.n, 'd:' .. ref)) do
    local o = redis.call('HGET', x.n, 'o:' .. d) or 'null'
    if string.sub(o, 1, #head) == head and o ~= head .. 'null}' then
      full = full or size + #o > x.inline
      if full then
        o = '{"status":"succeeded","task_id":"' .. redis.call('HGET', x.n, 't:' .. d) .. '","result_omitted":true}'
      else
        size = size + #o
      end
    end
    parts[#parts + 1] = '"' .. d .. '":' .. o
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- wf_release stores a release of node ref (kind "run" with its deps'
-- outcomes, or "cancel" with an error class) and adds it to rels.
local function wf_release(x, ref, kind, detail, rels)
  local v = redis.call('HMGET', x.n, 't:' .. ref, 'q:' .. ref)
  local rel = kind .. '|' .. v[1] .. '|' .. v[2] .. '|' .. detail
  redis.call('HSET', x.r, ref, rel)
  rels[#rels + 1] = ref .. '|' .. rel
end

-- wf_end records that node ref ended with status (outcome is its JSON):
-- its status, the workflow's counts, and whether its end fails the
-- workflow (it ended other than succeeded and has no dependant, or one
-- whose policy is fail). forced: a node cancelled on its own, which fails
-- the workflow whatever its dependants say.
--! uses: wf_list
local function wf_end(x, ref, status, outcome, forced)
  local prev = redis.call('HGET', x.n, 's:' .. ref)
  redis.call('HSET', x.n, 's:' .. ref, status, 'o:' .. ref, outcome)
  redis.call('HINCRBY', x.w, 'c:' .. prev, -1)
  redis.call('HINCRBY', x.w, 'c:' .. status, 1)
  redis.call('HINCRBY', x.w, 'ended', 1)
  if forced then redis.call('HSET', x.w, 'forced', '1') end
  if status ~= 'succeeded' then
    local deps = wf_list(x.n, 'c:' .. ref)
    local blame = #deps == 0
    for _, d in ipairs(deps) do
      if blame then break end
      blame = redis.call('HGET', x.n, 'p:' .. d) ~= 'c'
    end
    if blame then
      redis.call('HSET', x.n, 'b:' .. ref, '1')
      redis.call('HINCRBY', x.w, 'blamed', 1)
    end
  end
end

-- wf_decide resolves waiting node ref once nothing it waits for is left or
-- a dep failed: a workflow being cancelled leaves it to the cancel; a
-- failed dep under policy fail ends it cancelled (DependencyFailed), its
-- end queued in todo to resolve its own dependants; no dep left releases
-- it to run. ref's deps are counted already.
--! uses: wf_end, wf_release, wf_deps_outcomes, wf_outcome
local function wf_decide(x, ref, todo, rels)
  if x.cancel then return end
  local v = redis.call('HMGET', x.n, 'n:' .. ref, 'f:' .. ref, 'p:' .. ref)
  if v[2] == '1' and v[3] ~= 'c' then
    wf_end(x, ref, 'cancelled', wf_outcome('cancelled', nil, 'DependencyFailed'), false)
    wf_release(x, ref, 'cancel', 'DependencyFailed', rels)
    todo[#todo + 1] = ref
    todo[#todo + 1] = 'cancelled'
  elseif tonumber(v[1] or '0') <= 0 then
    redis.call('HSET', x.n, 's:' .. ref, 'released')
    redis.call('HINCRBY', x.w, 'c:waiting', -1)
    redis.call('HINCRBY', x.w, 'c:released', 1)
    wf_release(x, ref, 'run', wf_deps_outcomes(x, ref), rels)
  end
end

-- wf_resolve counts the ends queued in todo (pairs of ref, status) against
-- each of their dependants still waiting: O(1) per dependant, then a
-- decision for the ones resolved (see wf_decide), whose own ends join the
-- queue. A node whose definition is still being written (in D) is counted
-- but decided only when its batch is activated (wf_start).
--! uses: wf_list, wf_decide
local function wf_resolve(x, todo, rels)
  local i = 1
  while i < #todo do
    local ref, status = todo[i], todo[i + 1]
    i = i + 2
    for _, d in ipairs(wf_list(x.n, 'c:' .. ref)) do
      if redis.call('HGET', x.n, 's:' .. d) == 'waiting' then
        local left = redis.call('HINCRBY', x.n, 'n:' .. d, -1)
        local failed = status ~= 'succeeded'
        if failed then redis.call('HSET', x.n, 'f:' .. d, '1') end
        if (failed or left <= 0) and redis.call('HEXISTS', x.d, d) == 0 then
          wf_decide(x, d, todo, rels)
        end
      end
    end
  end
end

-- wf_finish ends the workflow once every node has ended: cancelled when it
-- was cancelled, failed when a node was cancelled on its own or an end
-- fails it (see wf_end), else succeeded; its keys then expire after the
-- longer of its nodes' retention and default_ms. Returns the final status,
-- or nil while nodes are left.
local function wf_finish(x, default_ms)
  local v = redis.call('HMGET', x.w, 'nodes', 'ended', 'status', 'cancel', 'forced', 'blamed', 'ret')
  if v[3] ~= 'running' or tonumber(v[2] or '0') < tonumber(v[1] or '0') then return nil end
  local st = 'succeeded'
  if v[4] == '1' then
    st = 'cancelled'
  elseif v[5] == '1' or tonumber(v[6] or '0') > 0 then
    st = 'failed'
  end
  redis.call('HSET', x.w, 'status', st, 'finished_at', x.now)
  local ms = math.max(tonumber(default_ms), tonumber(v[7] or '0') * 1000)
  if ms <= 0 then ms = 1000 end
  for _, k in ipairs({x.w, x.n, x.r, x.d, x.p}) do redis.call('PEXPIRE', k, ms) end
  return st
end
