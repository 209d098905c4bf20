-- A runner lock nobody can starve, end to end against the real local
-- kube-apiserver: expiry is judged on the holder's renewals alone (a write
-- that only moves the Lease's resourceVersion, such as a hand-over request,
-- keeps nobody out); several upgrade-side waiters take a dead background
-- holder's Lease over within one lease; a hand-over request is honoured only
-- while it is a live runner's (refreshed, once a lease) for a step the
-- upgrade has pending, and a request never holds the background tier off
-- beyond one lease. Every migration takes a mutual-exclusion marker (a
-- ConfigMap of one fixed name), so an overlap leaves `overlap-` behind.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local contains, lacks = h.contains, h.lacks

local HANDOVER = 'platform.cozystack.io/handover-requested-by'
local KUBECTL = h.q(h.testenv) .. ' kubectl'

-- exclusive(ns, slug, secs): a migration holding the exclusion marker
-- (support/runner.lua); overlaps(ns) counts the overlaps it saw.
local exclusive, overlaps = runner.exclusive, runner.overlaps

-- pre-apply `up-first`, `up-second`; background `bg-slow` (bg_secs), `bg-next`.
local function tree(ns, bg_secs)
  return fixture.tree({
    batches = { { '00001-v1.0.0', { 'up-first', 'up-second', 'bg-slow', 'bg-next' } } },
    scripts = {
      ['up-first'] = { body = exclusive(ns, 'up-first', 0.1) },
      ['up-second'] = { body = exclusive(ns, 'up-second', 0.1) },
      ['bg-slow'] = { tier = 'background', on_error = 'warn', body = exclusive(ns, 'bg-slow', bg_secs or 3) },
      ['bg-next'] = { tier = 'background', on_error = 'warn', body = exclusive(ns, 'bg-next', 0.1) },
    },
  })
end

-- A shell line that waits until the migration `slug` has started.
local function until_started(ns, slug) return runner.until_configmap(ns, 'ran-' .. slug .. '-') end

-- A shell loop (in the background, its pid in file `forger`) rewriting the
-- hand-over annotation with `value_fmt` (a printf format given the turn).
local function forger(ns, value_fmt, every)
  return string.format(
    '( i=0; while true; do i=$((i+1)); %s annotate --overwrite lease %s -n %s ' ..
    '"%s=$(printf %s $i)" >/dev/null 2>&1; sleep %s; done ) & echo $! >forger',
    KUBECTL, runner.LEASE, ns, HANDOVER, h.q(value_fmt), every)
end

local function stop_forger(out)
  local pid = out.forger:match('%d+')
  if pid then h.run('kill ' .. pid) end
end

describe('#e2e the runner lock cannot be starved', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('two upgrade-side waiters (the hook and an --only of a pre-apply slug) take a SIGKILLed background holder\'s Lease over within one lease', function()
    local ns = runner.new_ns()
    local dir = tree(ns, 30)
    runner.make_ledger(ns, {})
    local bg = runner.cmd(dir, ns, '--tier background --lease-duration 3s')
    local hook = runner.cmd(dir, ns, '--lease-duration 3s --lock-timeout 25s')
    local only = runner.cmd(dir, ns, '--only up-first --lease-duration 3s --lock-timeout 25s')
    local out = runner.alongside(bg, 0, until_started(ns, 'bg-slow') ..
      -- (the killed migration's marker stays: it is not the waiters')
      '; kill -9 $p; t0=$(date +%s.%N); ' .. KUBECTL .. ' delete configmap running -n ' .. ns .. ' >/dev/null; ' ..
      string.format('( %s >o2 2>e2; echo $? >r2; date +%%s.%%N >t2 ) & ( %s >o3 2>e3; echo $? >r3; date +%%s.%%N >t3 ) & wait; ', hook, only) ..
      'echo $t0 >t0')
    local all = out.e2 .. out.o2 .. out.e3 .. out.o3
    assert.are.equal('137\n', out.r1)
    assert.are.equal('0\n', out.r2, all)
    assert.are.equal('0\n', out.r3, all)
    contains(out.e2 .. out.e3, 'taking over the expired lease of ')
    -- the first took it over one lease (3 s) after its holder's last
    -- renewal, the second right after the first was done: neither waited its
    -- 25 s out (the bound leaves a loaded machine room for two runs)
    local t0 = tonumber(out.t0)
    local took = math.max(tonumber(out.t2) - t0, tonumber(out.t3) - t0)
    assert.is_true(took < 18, 'the waiters took ' .. took .. ' s')
    local recs = runner.records(ns)
    assert.are.equal('ok', recs['up-first'].state)
    assert.are.equal('ok', recs['up-second'].state)
    assert.is_nil(recs['bg-slow'], 'the killed migration is not recorded')
    assert.are.equal(0, overlaps(ns))
  end)

  it('a writer rewriting the hand-over request twice a second holds a background run off one lease at most', function()
    local ns = runner.new_ns()
    local dir = tree(ns, 0.1)
    runner.make_ledger(ns, {})
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns },
      spec = { holderIdentity = '', leaseDurationSeconds = 3 } })
    local bg = runner.cmd(dir, ns, '--tier background --lease-duration 3s --lock-timeout 20s')
    local out = runner.alongside('sleep 0.1', 0, forger(ns, 'forger-%s', 0.5) ..
      '; sleep 1; t0=$(date +%s.%N); ' .. bg .. ' >o2 2>e2; echo $? >r2; t1=$(date +%s.%N); echo "$t0 $t1" >t2')
    stop_forger(out)
    local all = out.o2 .. out.e2
    assert.are.equal('0\n', out.r2, all)
    local t0, t1 = out.t2:match('^(%S+) (%S+)')
    assert.is_true(tonumber(t1) - tonumber(t0) < 15, 'the background run took ' .. (tonumber(t1) - tonumber(t0)) .. ' s')
    local recs = runner.records(ns)
    assert.are.equal('ok', recs['bg-slow'].state)
    assert.are.equal('ok', recs['bg-next'].state)
  end)

  it('a writer rewriting the hand-over request does not keep a dead holder\'s Lease from expiring', function()
    local ns = runner.new_ns()
    local dir = tree(ns, 0.1)
    runner.make_ledger(ns, {})
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns, annotations = { ['platform.cozystack.io/holder-tier'] = 'background' } },
      spec = { holderIdentity = 'dead-host/1/1/00', leaseDurationSeconds = 3,
               renewTime = os.date('!%Y-%m-%dT%H:%M:%S.000000Z'), leaseTransitions = 0 } })
    local hook = runner.cmd(dir, ns, '--lease-duration 3s --lock-timeout 20s')
    local out = runner.alongside('sleep 0.1', 0, forger(ns, 'forger-%s', 0.5) ..
      '; t0=$(date +%s.%N); ' .. hook .. ' >o2 2>e2; echo $? >r2; t1=$(date +%s.%N); echo "$t0 $t1" >t2')
    stop_forger(out)
    assert.are.equal('0\n', out.r2, out.o2 .. out.e2)
    contains(out.e2, 'taking over the expired lease of dead-host/1/1/00')
    local t0, t1 = out.t2:match('^(%S+) (%S+)')
    assert.is_true(tonumber(t1) - tonumber(t0) < 15, 'the hook took ' .. (tonumber(t1) - tonumber(t0)) .. ' s')
    assert.are.equal('ok', runner.records(ns)['up-first'].state)
  end)

  it('a background holder ignores a request that names no step the upgrade has pending, and says so once, escaped', function()
    local requests = {
      '{"by":"forger/1/1/00","step":"bg-next","n":%s}',           -- a background slug
      '{"by":"forger/1/1/00","step":"up-first","n":%s}',          -- recorded already
      'forger\\n[2/2] background bg-next ... ok %s',              -- not a request at all
    }
    for _, fmt in ipairs(requests) do
      local ns = runner.new_ns()
      -- bg-slow runs 5 s: the holder reads the forged request (written once
      -- kubectl saw bg-slow start) at a renewal before it ends
      local dir = tree(ns, 5)
      -- the upgrade's steps ran already: a request for one is nobody's pending step
      local done = json.encode({ state = 'ok', at = '2026-01-01T00:00:00Z', attempts = 1 })
      runner.make_ledger(ns, { ['m.up-first'] = done, ['m.up-second'] = done })
      local bg = runner.cmd(dir, ns, '--tier background --lease-duration 3s')
      local out = runner.alongside(bg, 0, until_started(ns, 'bg-slow') .. '; ' .. forger(ns, fmt, 0.7))
      stop_forger(out)
      local all = out.o1 .. out.e1
      assert.are.equal('0\n', out.r1, all)
      lacks(out.o1, 'yielded', fmt)
      local recs = runner.records(ns)
      assert.are.equal('ok', recs['bg-slow'].state, fmt)
      assert.are.equal('ok', recs['bg-next'].state, fmt)
      local _, said = out.e1:gsub('ignoring the hand%-over request', '')
      assert.are.equal(1, said, all)
      -- one line for a request, whatever it holds
      for line in all:gmatch('[^\n]+') do
        assert.is_nil(line:match('^%[2/2%] background bg%-next %.%.%. ok %d'), 'a forged line: ' .. line)
      end
    end
  end)

  it('a background holder ignores a request its writer stopped refreshing (it expires), and honours a live one across a migration longer than two leases', function()
    -- a stale one: written once, for a step that is pending, never refreshed
    local ns = runner.new_ns()
    local dir = tree(ns, 8)
    runner.make_ledger(ns, {})
    local bg = runner.cmd(dir, ns, '--tier background --lease-duration 2s')
    local once = string.format('%s annotate --overwrite lease %s -n %s %s', KUBECTL, runner.LEASE, ns,
      h.q(HANDOVER .. '={"by":"gone-host/1/1/00","step":"up-first","n":1}'))
    local out = runner.alongside(bg, 0, until_started(ns, 'bg-slow') .. '; ' .. once .. ' >ann 2>&1')
    contains(out.ann, 'annotated')
    assert.are.equal('0\n', out.r1, out.o1 .. out.e1)
    lacks(out.o1, 'yielded')
    assert.are.equal('ok', runner.records(ns)['bg-next'].state)

    -- a live one: the hook waits through a background migration of 8 s
    -- with a 2 s lease, refreshing its request once a lease
    local ns2 = runner.new_ns()
    local dir2 = tree(ns2, 8)
    runner.make_ledger(ns2, {})
    local bg2 = runner.cmd(dir2, ns2, '--tier background --lease-duration 2s')
    local hook = runner.cmd(dir2, ns2, '--lease-duration 2s --lock-timeout 30s')
    local out2 = runner.alongside(bg2, 0, until_started(ns2, 'bg-slow') .. '; ' .. hook .. ' >o2 2>e2; echo $? >r2')
    local all = out2.o1 .. out2.e1 .. out2.o2 .. out2.e2
    assert.are.equal('0\n', out2.r1, all)
    assert.are.equal('0\n', out2.r2, all)
    contains(out2.o1, 'after bg-slow, before bg-next')
    local recs = runner.records(ns2)
    assert.are.equal('ok', recs['up-first'].state)
    assert.is_nil(recs['bg-next'])
    assert.are.equal(0, overlaps(ns2))
  end)

  it('a background runner facing a pre-apply holder that stopped renewing takes the Lease over instead of yielding for ever', function()
    local ns = runner.new_ns()
    local dir = tree(ns, 0.1)
    runner.make_ledger(ns, {})
    -- a hook killed mid-run: its Lease says pre-apply, renewed 10 minutes ago
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns, annotations = { ['platform.cozystack.io/holder-tier'] = 'pre-apply' } },
      spec = { holderIdentity = 'dead-hook/1/1/00', leaseDurationSeconds = 3,
               renewTime = os.date('!%Y-%m-%dT%H:%M:%S.000000Z', os.time() - 600), leaseTransitions = 0 } })
    local res = runner.run(dir, ns, '--tier', 'background', '--lease-duration', '3s', '--lock-timeout', '20s')
    assert.are.equal(0, res.code, res.out .. res.err)
    contains(res.err, 'taking over the expired lease of dead-hook/1/1/00')
    assert.are.equal('ok', runner.records(ns)['bg-next'].state)
  end)
end)
