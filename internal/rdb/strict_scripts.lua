-- Strict scripts, a test mode (StrictScripts): prepended to every script,
-- whose redis.call and redis.pcall are renamed to dk_call and dk_pcall.
-- Each command's keys (as COMMAND GETKEYS tells them) must be one of the
-- script's KEYS or carry the hash tag of one, as on a server that refuses
-- undeclared keys, no command takes more than 3,999 arguments, as some
-- proxies allow, and none blocks (a blocking command in a script does not
-- wait: it answers at once, which is never what its caller meant);
-- anything else fails the script, naming the key, the count or the
-- command.
local dk_real_call, dk_real_pcall = redis.call, redis.pcall
local function dk_tag(key)
  local open = string.find(key, '{', 1, true)
  if open then
    local close = string.find(key, '}', open + 1, true)
    if close and close > open + 1 then
      return string.sub(key, open + 1, close - 1)
    end
  end
  return nil
end
local dk_exact, dk_tags = {}, {}
for _, key in ipairs(KEYS) do
  dk_exact[key] = true
  local tag = dk_tag(key)
  if tag then
    dk_tags[tag] = true
  end
end
local dk_blocking = {blpop = true, brpop = true, blmove = true, brpoplpush = true, bzpopmin = true,
  bzpopmax = true, blmpop = true, bzmpop = true, wait = true, waitaof = true}
local function dk_check(cmd, ...)
  local name = string.lower(tostring(cmd))
  if dk_blocking[name] then
    error('strict scripts: ' .. tostring(cmd) .. ' blocks')
  end
  if name == 'xread' or name == 'xreadgroup' then
    for i = 1, select('#', ...) do
      local a = select(i, ...)
      if type(a) == 'string' and string.upper(a) == 'BLOCK' then
        error('strict scripts: ' .. tostring(cmd) .. ' BLOCK blocks')
      end
    end
  end
  local n = select('#', ...)
  if n + 1 > 3999 then
    error('strict scripts: ' .. tostring(cmd) .. ' sent with ' .. (n + 1) .. ' arguments, more than 3,999')
  end
  if n == 0 then
    return -- TIME: no arguments, no keys
  end
  local keys = dk_real_pcall('COMMAND', 'GETKEYS', cmd, ...)
  if type(keys) == 'table' and keys.err then
    if string.find(keys.err, 'no key arguments', 1, true) then
      return -- PUBLISH, SPUBLISH
    end
    error('strict scripts: COMMAND GETKEYS ' .. tostring(cmd) .. ': ' .. keys.err)
  end
  for _, key in ipairs(keys) do
    local tag = dk_tag(key)
    if not dk_exact[key] and not (tag and dk_tags[tag]) then
      error('strict scripts: ' .. tostring(cmd) .. ' touches ' .. key .. ', which is not in KEYS and has no declared hash tag')
    end
  end
end
local function dk_call(cmd, ...)
  dk_check(cmd, ...)
  return dk_real_call(cmd, ...)
end
local function dk_pcall(cmd, ...)
  dk_check(cmd, ...)
  return dk_real_pcall(cmd, ...)
end
