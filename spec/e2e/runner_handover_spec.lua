-- The upgrade first on the runner lock, end to end against the real local
-- kube-apiserver: a pre-apply runner that finds a background runner holding
-- the Lease asks for it (an annotation on the Lease), and the background
-- runner hands it over at its next migration boundary, after recording the
-- migration in flight; a background runner never waits behind, nor
-- preempts, a pre-apply one; a request left by a runner that is gone, or
-- withdrawn by one that gave up, does not hold the background tier for
-- ever. Every migration here takes a mutual-exclusion marker (a ConfigMap
-- of one fixed name, whose create fails while another migration holds it),
-- so an overlap of two migrations leaves an `overlap-` ConfigMap behind.
local h = require('support.helpers')
local runner = require('support.runner')
local fixture = require('support.fixture')
local json = require('json')

local contains = h.contains

local HANDOVER = 'platform.cozystack.io/handover-requested-by'
local ROLE = 'platform.cozystack.io/holder-tier'

-- exclusive(ns, slug, secs): a migration holding the exclusion marker
-- (support/runner.lua); overlaps(ns) counts the overlaps it saw.
local exclusive, overlaps = runner.exclusive, runner.overlaps

-- The tree: pre-apply `up-first` (quick, or up_secs), background
-- `bg-slow` (3 s, or bg_secs), `bg-next`, `bg-last`.
local function tree(ns, up_secs, bg_secs)
  return fixture.tree({
    batches = { { '00001-v1.0.0', { 'up-first', 'bg-slow', 'bg-next', 'bg-last' } } },
    scripts = {
      ['up-first'] = { body = exclusive(ns, 'up-first', up_secs or 0.1) },
      ['bg-slow'] = { tier = 'background', on_error = 'warn', body = exclusive(ns, 'bg-slow', bg_secs or 3) },
      ['bg-next'] = { tier = 'background', on_error = 'warn', body = exclusive(ns, 'bg-next', 0.1) },
      ['bg-last'] = { tier = 'background', on_error = 'warn', body = exclusive(ns, 'bg-last', 0.1) },
    },
  })
end

-- Waits until the migration `slug` has started (its ran- marker exists).
local function started(ns, slug)
  return h.eventually(30, function()
    local _, gen = runner.markers(ns)
    return (gen[slug] or 0) >= 1
  end)
end

describe('#e2e the lock hand-over', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  it('a background run yields within one migration; the pre-apply run completes; the next run of the tier resumes; no two migrations overlap', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    local bg = runner.cmd(dir, ns, '--tier background --lock-timeout 60s')
    local pre = runner.cmd(dir, ns, '--lock-timeout 60s')
    -- the pre-apply run starts once bg-slow runs, 3 s before it ends
    local out = runner.alongside(bg, 0,
      runner.until_configmap(ns, 'ran-bg-slow-') .. '; ' ..
        string.format('t0=$(date +%%s.%%N); %s >o2 2>e2; echo $? >r2; t1=$(date +%%s.%%N); echo "$t0 $t1" >t2', pre))
    local all = out.o1 .. out.e1 .. out.o2 .. out.e2
    assert.are.equal('0\n', out.r1, all)
    assert.are.equal('0\n', out.r2, all)
    -- the background run recorded bg-slow, then handed over before bg-next
    contains(out.o1, 'yielded the runner lock to the upgrade (pre-apply runner ')
    contains(out.o1, 'after bg-slow, before bg-next')
    contains(out.e2, 'asked it to hand it over after the migration it is running')
    local recs = runner.records(ns)
    assert.are.equal('ok', recs['bg-slow'].state)
    assert.are.equal('ok', recs['up-first'].state)
    assert.is_nil(recs['bg-next'], 'ran after the hand-over was asked for')
    assert.is_nil(recs['bg-last'])
    -- the upgrade waited for the rest of bg-slow only (at most 3 s), not
    -- for the tier nor for a poll of --lock-timeout's 60 s (bg-next is nil
    -- above: the tier stopped)
    local t0, t1 = out.t2:match('^(%S+) (%S+)')
    assert.is_true(tonumber(t1) - tonumber(t0) < 10, 'the pre-apply run took ' .. (tonumber(t1) - tonumber(t0)) .. ' s')
    -- the Lease is free again, with neither a holder nor a request left
    local lease = runner.get_lease(ns)
    assert.are.equal('', lease.spec.holderIdentity or '')
    assert.is_nil((lease.metadata.annotations or {})[HANDOVER])
    -- the ledger says why the tier stopped
    local said = false
    for _, e in ipairs(runner.events(ns)) do
      if e.reason == 'MigrationsYielded' then said = h.has(e.message, 'before bg-next') end
    end
    assert.is_true(said, 'no MigrationsYielded Event')
    -- the next run of the tier (a dispatched Job's) resumes where it stopped
    local res = h.must(runner.run(dir, ns, '--tier', 'background'))
    contains(res.out, 'bg-next ... ok')
    recs = runner.records(ns)
    assert.are.equal('ok', recs['bg-next'].state)
    assert.are.equal('ok', recs['bg-last'].state)
    assert.are.equal(1, recs['bg-slow'].attempts, 'nothing ran twice')
    local _, gen = runner.markers(ns)
    assert.are.same({ ['up-first'] = 1, ['bg-slow'] = 1, ['bg-next'] = 1, ['bg-last'] = 1 }, gen)
    assert.are.equal(0, overlaps(ns))
  end)

  it('a background run never waits behind nor preempts a pre-apply run: it yields at once, running nothing', function()
    local ns = runner.new_ns()
    local dir = tree(ns, 4)
    runner.make_ledger(ns, {})
    local pre = runner.cmd(dir, ns, '--lock-timeout 60s')
    local bg = runner.cmd(dir, ns, '--tier background --lock-timeout 60s')
    local out = runner.alongside(pre, 0,
      runner.until_configmap(ns, 'ran-up-first-') .. '; ' ..
        string.format('t0=$(date +%%s.%%N); %s >o2 2>e2; echo $? >r2; t1=$(date +%%s.%%N); echo "$t0 $t1" >t2', bg))
    local all = out.o1 .. out.e1 .. out.o2 .. out.e2
    assert.are.equal('0\n', out.r1, all)
    assert.are.equal('0\n', out.r2, all)
    contains(out.o2, 'is held by the upgrade (pre-apply runner ')
    contains(out.o2, 'the background tier yields to the upgrade; nothing ran')
    local t0, t1 = out.t2:match('^(%S+) (%S+)')
    assert.is_true(tonumber(t1) - tonumber(t0) < 3, 'the background run waited ' .. (tonumber(t1) - tonumber(t0)) .. ' s')
    local recs = runner.records(ns)
    assert.are.equal('ok', recs['up-first'].state)
    assert.is_nil(recs['bg-slow'])
    assert.are.equal(0, overlaps(ns))
  end)

  it('records the holder\'s role on the Lease', function()
    local ns = runner.new_ns()
    local dir = tree(ns, 2)
    runner.make_ledger(ns, {})
    local out = runner.alongside(runner.cmd(dir, ns, ''), 0,
      runner.until_configmap(ns, 'ran-up-first-') .. '; ' ..
        string.format('%s get lease %s -n %s -o json >lease', h.q(h.testenv) .. ' kubectl', runner.LEASE, ns))
    assert.are.equal('0\n', out.r1, out.e1)
    local lease = json.decode(h.slurp(out.dir .. '/lease'))
    assert.are.equal('pre-apply', lease.metadata.annotations[ROLE])
  end)

  it('a pre-apply run that gives up withdraws its request, and the background run goes on to its end', function()
    local ns = runner.new_ns()
    local dir = tree(ns, nil, 6)
    runner.make_ledger(ns, {})
    -- the pre-apply waiter gives up (1 s) long before bg-slow ends (6 s)
    local bg = runner.cmd(dir, ns, '--tier background --lock-timeout 60s')
    local pre = runner.cmd(dir, ns, '--lock-timeout 1s')
    local out = runner.alongside(bg, 0,
      runner.until_configmap(ns, 'ran-bg-slow-') .. '; ' ..
        string.format('%s >o2 2>e2; echo $? >r2; %s get lease %s -n %s -o json >lease',
        pre, h.q(h.testenv) .. ' kubectl', runner.LEASE, ns))
    local all = out.o1 .. out.e1 .. out.o2 .. out.e2
    assert.are.equal('5\n', out.r2, all)
    assert.is_nil((json.decode(h.slurp(out.dir .. '/lease')).metadata.annotations or {})[HANDOVER],
      'the request outlived the runner that gave up')
    assert.are.equal('0\n', out.r1, all)
    h.lacks(out.o1, 'yielded')
    local recs = runner.records(ns)
    for _, slug in ipairs({ 'bg-slow', 'bg-next', 'bg-last' }) do assert.are.equal('ok', recs[slug].state, slug) end
    assert.is_nil(recs['up-first'])
  end)

  it('a request left on a free Lease by a runner that is gone holds a background run for one lease duration, then it runs', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    h.kcreate({ apiVersion = 'coordination.k8s.io/v1', kind = 'Lease',
      metadata = { name = runner.LEASE, namespace = ns, annotations = { [HANDOVER] = 'gone-host/1/1/00' } },
      spec = { holderIdentity = '', leaseDurationSeconds = 3 } })
    local t0 = os.time()
    local res = runner.run(dir, ns, '--tier', 'background', '--lease-duration', '3s', '--lock-timeout', '30s')
    local took = os.time() - t0
    assert.are.equal(0, res.code, res.out .. res.err)
    contains(res.err, 'is free, but the upgrade asked for it; taken unless the upgrade takes it within 3s')
    assert.is_true(took >= 3, 'took the Lease after ' .. took .. ' s')
    local recs = runner.records(ns)
    assert.are.equal('ok', recs['bg-last'].state)
    -- taking it dropped the stale request
    assert.is_nil((runner.get_lease(ns).metadata.annotations or {})[HANDOVER])
  end)
end)
