-- A lock judged on one clock, as repeated trials: two runners over one
-- namespace, one of them with its wall clock 120 s behind, 90 s behind or
-- 120 s ahead (build/skewclock.so, an LD_PRELOAD over clock_gettime's
-- CLOCK_REALTIME, time() and gettimeofday; CLOCK_MONOTONIC untouched).
-- A clock behind matters in the holder (the renewTime it writes looks old to
-- the other), a clock ahead in the one that waits (every renewTime looks
-- old to it), so a runner behind starts first and holds, a runner ahead
-- comes second and waits. 8 Lua migrations record their spans on
-- CLOCK_MONOTONIC: no two may overlap, each runs once and is recorded ok
-- once; the second runner waits (default lease) and finds nothing to run.
-- The skewed runner's renewTime read from the Lease proves its clock was off.
local h = require('support.helpers')
local T = require('support.trials')
T.bind(it, function(msg) pending(msg) end)

local STEPS = 8
local SECS = 0.4

describe('#reliability a lock judged on one clock', function()
  local c
  setup(function() c = T.default_cluster() end)
  teardown(function() c.cleanup() end)

  -- A runner whose clock is behind sees the apiserver's certificate as not
  -- yet valid until the testenv's PKI is older than the skew.
  local function pki_old_enough(skew)
    local dir = os.getenv('TESTENV_DIR')
    if skew >= 0 or not dir then return end
    local st = h.run('stat -c %Y ' .. h.q(dir .. '/pki/apiserver.crt'))
    local made = tonumber(st.out:match('%d+'))
    local wait = made and made - skew + 5 - os.time()
    if wait and wait > 0 then
      T.note(string.format('waited %ds for the PKI to be older than the skew', wait))
      h.sleep(wait)
    end
  end

  local function trial(skew)
    pki_old_enough(skew)
    local ns = c.new_ns('rel-skew')
    c.empty_ledger(ns)
    local dir = T.spans(ns, STEPS, SECS, 'skew')
    local cmd = c.run_cmd(dir, ns, '--lock-timeout 60s')
    local skewed = T.skewed(cmd, skew)
    local first = T.start(skew < 0 and skewed or cmd)
    assert.is_true(h.eventually(20, function() return h.has(T.out(first), 'running') end),
      'the first runner did not start a migration: ' .. T.err(first))
    local renew_while = T.lease(c, ns)
    local second = T.start(skew < 0 and cmd or skewed)
    local rc1, rc2 = T.wait(first, 120), T.wait(second, 120)
    local lease_after = T.lease(c, ns)
    local problems = {}
    local function add(list) for _, x in ipairs(list) do problems[#problems + 1] = x end end
    if rc1 ~= 0 then problems[#problems + 1] = 'the first runner exited ' .. tostring(rc1) .. ': ' .. T.err(first) end
    if rc2 ~= 0 then problems[#problems + 1] = 'the second runner exited ' .. tostring(rc2) .. ': ' .. T.err(second) end
    if h.has(T.out(second), 'running') then problems[#problems + 1] = 'the second runner executed migrations' end
    if h.has(T.err(second), 'taking over') then problems[#problems + 1] = 'the second runner took the Lease over' end
    local slugs = {}
    for k = 1, STEPS do slugs[k] = string.format('skew-%02d', k) end
    add(T.span_problems(T.span_list(c, ns), slugs))
    local recs, bad = T.ledger(c, ns)
    add(bad)
    for _, slug in ipairs(slugs) do
      local r = (recs or {})[slug]
      if not r or r.state ~= 'ok' or r.attempts ~= 1 then problems[#problems + 1] = slug .. ' is not recorded ok once' end
    end
    -- the shim was in force: the skewed runner's renewTime is off by the skew
    local lease = skew < 0 and renew_while or lease_after
    local written = lease and T.micro(lease.spec.renewTime)
    local off = written and written - T.wall()
    T.note(string.format('skew %+ds: the skewed runner wrote renewTime %s (%+.0fs); exits %s/%s',
      skew, lease and lease.spec.renewTime or '?', off or 0, tostring(rc1), tostring(rc2)))
    if not off or math.abs(off - skew) > 30 then
      problems[#problems + 1] = string.format('the skewed runner\'s renewTime is %s s off, not about %d s',
        tostring(off), skew)
    end
    T.check(problems, string.format('runners with a %+d s clock', skew))
  end

  for _, skew in ipairs({ -120, -90, 120 }) do
    local n = T.count('skew', 1, 3)
    for i = 1, n do
      T.trial(string.format('clock skew %+ds', skew), string.format(
        'a runner with its clock %d s %s never lets two runners overlap (trial %d/%d)',
        math.abs(skew), skew < 0 and 'behind holds the lock alone' or 'ahead waits for the holder', i, n),
        function() trial(skew) end)
    end
  end
end)
