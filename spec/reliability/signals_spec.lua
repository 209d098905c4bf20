-- The runner as PID 1 of its container, stopped by SIGTERM (the kubelet's,
-- when the hook's pod is deleted or its activeDeadlineSeconds passes), as
-- repeated trials: a 6-migration sequence runs as PID 1 of a PID namespace
-- of its own (unshare --pid --fork: the kernel drops a signal whose
-- disposition is the default for a namespace's init), SIGTERM comes at a
-- random moment while a migration runs. Lua migrations (support.trials'
-- sequence), then shell ones that tolerate kubectl errors as legacy scripts
-- do and ignore TERM themselves (only the KILL after --grace ends them).
-- The runner must exit 143 with one line naming SIGTERM and the migration,
-- record nothing for that migration (no ok without its end marker: a script
-- that ran on and exited 0 is not recorded either), release the Lease, and
-- leave no process; then a run completes everything, each ok once.
local h = require('support.helpers')
local T = require('support.trials')
T.bind(it, function(msg) pending(msg) end)

local STEPS = 6
local GRACE = '2s'

-- A shell sequence seq-01..: each creates start-KK, beats 10 times 0.1 s
-- with TERM ignored, then creates its end marker (label trial/end=KK); every
-- kubectl error is tolerated ("|| true"), as legacy scripts do.
local function shell_sequence(ns)
  local lines, scripts = {}, {}
  for k = 1, STEPS do
    local slug = string.format('seq-%02d', k)
    lines[#lines + 1] = slug
    scripts[slug] = { shell = true, body = string.format([[
kc() { %s -n %s "$@" >/dev/null 2>&1; }
kc create configmap start-%02d || true
trap 'echo "TERM: ignored"' TERM
for _ in $(seq 10); do sleep 0.1; done
printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"end-%02d-","labels":{"trial/end":"%02d"}}}' |
  kc create -f - || true]], h.q(T.kubectl_bin), ns, k, k, k) }
  end
  return require('support.fixture').tree({ batches = { { '00001-v1.0.0', lines } }, scripts = scripts })
end

-- The slug whose "running" line is the last one printed.
local function running_slug(out)
  local last
  for slug in out:gmatch('%] pre%-apply (%S+) %.%.%. running') do last = slug end
  return last
end

describe('#reliability the runner as PID 1, stopped by SIGTERM', function()
  local c
  setup(function() c = T.default_cluster() end)
  teardown(function() c.cleanup() end)

  local function trial(kind)
    local ns = T.sequence_ns(c, 'rel-sig')
    local dir = kind == 'lua' and T.sequence(ns, STEPS, 0.4) or shell_sequence(ns)
    local p = T.start(T.pid1(c.run_cmd(dir, ns, '--grace ' .. GRACE)))
    local pid1 = T.pid1_of(p)
    assert.is_not_nil(pid1, 'the runner did not start as PID 1: ' .. T.err(p))
    h.sleep(string.format('%.3f', 0.3 + math.random() * STEPS * 0.6))
    -- the moment: a migration's child alive
    assert.is_true(h.eventually(20, function() return #T.children(pid1) > 0 or T.wait(p, 0) ~= nil end),
      'no migration ran')
    local t0 = T.now()
    local seen = running_slug(T.out(p))
    T.signal({ pid = pid1 }, 'TERM')
    local rc = T.wait(p, 60)
    local took = T.now() - t0
    local err = T.err(p)
    -- the migration the signal stopped, as the runner names it: the one seen
    -- running, or, when that one ended between the look and the signal (a
    -- race of the trial's, not the runner's), none (between two) or the next
    local slug = err:match('stopped by SIGTERM while pre%-apply (%S+) ran')
    local between = not slug and err:match('stopped by SIGTERM after (%S+), before')
    T.note(string.format('%s: SIGTERM in %s, exit %s after %.1fs', kind, tostring(slug), tostring(rc), took))
    -- every check first, so that a failing trial lists all it saw
    local problems = T.stop_problems(rc, err, 'TERM', slug)
    local k = seen and tonumber(seen:match('(%d+)$'))
    if seen and not (slug == seen or between == seen or slug == string.format('seq-%02d', k + 1)) then
      problems[#problems + 1] = string.format('the runner says it stopped %s; %s was running', tostring(slug), seen)
    end
    local recs, bad_values = T.ledger(c, ns)
    local function add(list) for _, x in ipairs(list) do problems[#problems + 1] = x end end
    add(bad_values)
    add(T.ok_without_marker(recs, T.labelled(c, ns, 'trial/end')))
    if slug and recs and recs[slug] then
      problems[#problems + 1] = slug .. ', which SIGTERM stopped, is recorded ' .. recs[slug].state
    end
    add(T.release_problems(T.lease(c, ns)))
    h.eventually(5, function() return #T.orphans(dir) == 0 end)
    for _, o in ipairs(T.orphans(dir)) do problems[#problems + 1] = 'process left: ' .. o end
    T.check(problems, 'after SIGTERM (stderr: ' .. err:sub(-300) .. ')')

    local again = h.run(c.run_cmd(dir, ns, ''))
    assert.are.equal(0, again.code, 'the run after: ' .. again.err)
    recs, problems = T.ledger(c, ns)
    T.check(problems, 'the ledger at the end')
    T.check(T.ok_without_marker(recs, T.labelled(c, ns, 'trial/end')), 'at the end')
    local bad = {}
    for k = 1, STEPS do
      local s = string.format('seq-%02d', k)
      if not recs[s] or recs[s].state ~= 'ok' or recs[s].attempts ~= 1 then bad[#bad + 1] = s end
    end
    T.check(bad, 'records that are not ok with attempts 1')
  end

  for _, kind in ipairs({ 'lua', 'shell' }) do
    local n = T.count('sigterm-' .. kind, 1, 5)
    for i = 1, n do
      T.trial('SIGTERM as PID 1: ' .. kind, string.format(
        'a %s migration stopped by SIGTERM to the runner as PID 1: exit 143, not recorded, the Lease released (trial %d/%d)',
        kind, i, n), function() trial(kind) end)
    end
  end
end)
