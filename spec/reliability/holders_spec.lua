-- Unique holders, as repeated trials: two runners with the same hostname,
-- each PID 1 of its own PID namespace (unshare --pid --fork --uts, hostname
-- "twin"), started together (in the same second), over 8 Lua migrations
-- that record their spans on CLOCK_MONOTONIC. <host>/<pid>/<start> alone would
-- make them one holder ("twin/1/<second>"): the second would take the Lease
-- for its own and both would run everything. A holder's identity has a
-- random part: exactly one executes, the other waits and finds nothing to
-- run, no two spans overlap, each migration is recorded ok once, by a
-- runner named twin/1/<second>/<random>.
local h = require('support.helpers')
local T = require('support.trials')
T.bind(it, function(msg) pending(msg) end)

local STEPS = 8
local SECS = 0.3

describe('#reliability unique holders', function()
  local c
  setup(function() c = T.default_cluster() end)
  teardown(function() c.cleanup() end)

  local function trial()
    local ns = c.new_ns('rel-twin')
    c.empty_ledger(ns)
    local dir = T.spans(ns, STEPS, SECS, 'twin')
    local cmd = T.pid1(c.run_cmd(dir, ns, '--lock-timeout 60s'), 'twin')
    local d = h.tmpdir()
    -- started together: one shell line forks both at once
    h.must(h.run(string.format('cd %s && { ( %s >o1 2>e1; echo $? >r1 ) & ( %s >o2 2>e2; echo $? >r2 ) & wait; }',
      h.q(d), cmd, cmd)), 'the runners')
    local problems = {}
    local function add(list) for _, x in ipairs(list) do problems[#problems + 1] = x end end
    local ran = 0
    for r = 1, 2 do
      local code = tonumber(h.slurp(d .. '/r' .. r))
      if code ~= 0 then problems[#problems + 1] = string.format('runner %d exited %s: %s', r, tostring(code),
        h.slurp(d .. '/e' .. r):sub(-300)) end
      if h.has(h.slurp(d .. '/o' .. r), 'running') then ran = ran + 1 end
    end
    if ran ~= 1 then problems[#problems + 1] = ran .. ' runners executed migrations' end
    local slugs = {}
    for k = 1, STEPS do slugs[k] = string.format('twin-%02d', k) end
    add(T.span_problems(T.span_list(c, ns), slugs))
    local recs = T.records(c, ns) or {}
    local holders = {}
    for _, slug in ipairs(slugs) do
      local r = recs[slug]
      if not r or r.state ~= 'ok' or r.attempts ~= 1 then
        problems[#problems + 1] = slug .. ' is not recorded ok once'
      elseif not (r.runner or ''):match('^twin/1/%d+/%x+$') then
        problems[#problems + 1] = slug .. ' names the runner ' .. tostring(r.runner)
      else
        holders[r.runner] = true
      end
    end
    local waited = h.slurp(d .. '/e1') .. h.slurp(d .. '/e2')
    T.note(string.format('holder %s; the other %s', next(holders) or '?',
      h.has(waited, 'held by twin/1/') and 'waited for it' or 'did not wait'))
    T.check(problems, 'two runners named twin/1/<second>')
  end

  local n = T.count('holders', 1, 3)
  for i = 1, n do
    T.trial('holder collision', string.format(
      'two runners with one hostname, both PID 1, started together: one runs, the other waits (trial %d/%d)', i, n),
      trial)
  end
end)
