-- One runner at a time, as repeated trials: 2 and then 4 runners started
-- together on one namespace, over 10 Lua migrations that each record the
-- span they ran in (CLOCK_MONOTONIC, one clock for every process here).
-- No two spans may overlap, each migration runs exactly once and is
-- recorded ok once (attempts 1). Odd trials give the losers a short
-- --lock-timeout: exactly one runner exits 0 and the others exit 5 (docs/operating.md
-- "Exit codes": the lock is held by another runner, named); even trials let
-- them wait: all exit 0 and every loser, getting the lock after the winner,
-- finds nothing to run.
local h = require('support.helpers')
local T = require('support.trials')
T.bind(it, function(msg) pending(msg) end)

local STEPS = 10
local SECS = 0.15
local LEASE = 'cozystack-version-lock'

describe('#reliability one runner at a time', function()
  local c
  setup(function() c = T.default_cluster() end)
  teardown(function() c.cleanup() end)

  local function trial(runners, i)
    local waits = (i + runners // 2) % 2 == 0
    local ns = c.new_ns('rel-conc')
    c.empty_ledger(ns)
    local dir = T.spans(ns, STEPS, SECS, 'conc')
    local flags = waits and '--lock-timeout 60s' or '--lock-timeout 500ms'
    local cmd = c.run_cmd(dir, ns, flags)
    local ps = {}
    -- started together: one shell line forks them all at once
    local d = h.tmpdir()
    local line = {}
    for r = 1, runners do
      line[#line + 1] = string.format('( %s >o%d 2>e%d; echo $? >r%d ) &', cmd, r, r, r)
    end
    h.must(h.run(string.format('cd %s && { %s wait; }', h.q(d), table.concat(line, ' '))), 'the runners')
    local codes, winners, losers = {}, 0, 0
    for r = 1, runners do
      ps[r] = { code = tonumber(h.slurp(d .. '/r' .. r)), out = h.slurp(d .. '/o' .. r), err = h.slurp(d .. '/e' .. r) }
      codes[#codes + 1] = tostring(ps[r].code)
      if h.has(ps[r].out, 'running') then winners = winners + 1 else losers = losers + 1 end
    end
    T.note(string.format('%s losers, exit codes %s', waits and 'waiting' or 'impatient', table.concat(codes, ' ')))
    assert.are.equal(1, winners, 'runners that executed migrations (exit codes ' .. table.concat(codes, ' ') .. ')')
    for _, p in ipairs(ps) do
      if h.has(p.out, 'running') then
        assert.are.equal(0, p.code, 'the winner: ' .. p.err)
      elseif waits then
        assert.are.equal(0, p.code, 'a waiting loser: ' .. p.err)
        h.contains(p.out, 'nothing to run', 'a waiting loser\'s output')
      else
        assert.are.equal(5, p.code, 'an impatient loser: ' .. p.err)
        h.contains(p.err, 'the runner lock ' .. ns .. '/' .. LEASE .. ' is held by ', 'its stderr')
      end
    end
    local slugs = {}
    for k = 1, STEPS do slugs[k] = string.format('conc-%02d', k) end
    T.check(T.span_problems(T.span_list(c, ns), slugs), 'the spans')
    local recs, problems = T.ledger(c, ns)
    T.check(problems, 'the ledger')
    local bad = {}
    for _, slug in ipairs(slugs) do
      local r = recs[slug]
      if not r or r.state ~= 'ok' or r.attempts ~= 1 then bad[#bad + 1] = slug end
    end
    T.check(bad, 'records that are not ok with attempts 1')
  end

  for _, runners in ipairs({ 2, 4 }) do
    local n = T.count('concurrency-' .. runners, 1, 10)
    for i = 1, n do
      T.trial(string.format('concurrency: %d runners', runners),
        string.format('%d runners started together: one runs, each migration once, no overlap (trial %d/%d)',
          runners, i, n),
        function() trial(runners, i) end)
    end
  end
end)
