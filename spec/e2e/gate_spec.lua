-- The render gate of deploy/helm with real helm against the real local
-- kube-apiserver (`helm template --dry-run=server`, so `lookup` sees the
-- ledger): the pre-apply hook (its Job, ServiceAccount and binding) is
-- rendered only when a shipped pre-apply or revoked slug has no record, when
-- the ledger is absent, or when a slug to skip is not recorded skipped; the
-- rest of the chart (the index, the dispatcher) always is. Fail-open under
-- a client render is in spec/release/deploy_spec.lua.
local h = require('support.helpers')
local runner = require('support.runner')
local json = require('json')

local CHART = h.root .. '/deploy/helm'
local HELM = h.root .. '/build/testenv/bin/helm'

-- The chart with an index of its own: pre-apply up-a, up-b; background bg-a;
-- revoked gone-x.
local function chart()
  local dir = h.tmpdir()
  h.must(h.run(string.format('cp -R %s/. %s/', h.q(CHART), h.q(dir))))
  h.write(dir .. '/files/cozy-migrate-index.json', json.encode({ version = 1, image = json.null,
    ['pre-apply'] = { 'up-a', 'up-b' },
    background = { { slug = 'bg-a', timeout_s = 600, on_error = 'warn', requires = json.array({}) } },
    revoked = { 'gone-x' } }))
  return dir
end

-- What helm renders against the cluster in KUBECONFIG: {Kind/name = true}.
local function render(dir, ns, extra)
  local res = h.must(h.run(string.format('%s template lane %s -n %s --dry-run=server %s', h.q(HELM), h.q(dir), ns,
    extra or '')), 'helm template --dry-run=server')
  local out = {}
  for k, n in res.out:gmatch('\nkind: (%w+)\nmetadata:\n  name: ([%w%-]+)') do out[k .. '/' .. n] = true end
  return out
end

-- How many of the hook's three objects are rendered.
local function has_hook(objs, ns)
  local n = 0
  for _, o in ipairs({ 'Job/cozystack-migrations', 'ServiceAccount/cozystack-migrations',
    'ClusterRoleBinding/cozystack-migrations-' .. ns }) do
    if objs[o] then n = n + 1 end
  end
  return n
end

local function rec(state) return json.encode({ state = state, at = '2026-01-01T00:00:00Z', attempts = 1 }) end

describe('#e2e the render gate (helm template --dry-run=server)', function()
  local dir
  setup(function()
    h.need_cluster()
    h.must(h.run(h.q(h.testenv) .. ' build helm'), 'tools/testenv build helm')
    dir = chart()
  end)
  teardown(runner.delete_namespaces)

  it('renders the hook when the ledger is absent (a fresh install: the hook seeds it)', function()
    local ns = runner.new_ns()
    local objs = render(dir, ns)
    assert.are.equal(3, has_hook(objs, ns))
    assert.is_true(objs['ConfigMap/cozystack-migrations-index'])
    assert.is_true(objs['CronJob/cozystack-migrations-dispatch'])
  end)

  it('renders no hook when every shipped pre-apply and revoked slug has a record, whatever its state; the rest still renders', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, { ['m.up-a'] = rec('ok'), ['m.up-b'] = rec('failed'), ['m.gone-x'] = rec('revoked') })
    local objs = render(dir, ns)
    assert.are.equal(0, has_hook(objs, ns))
    assert.is_true(objs['ConfigMap/cozystack-migrations-index'])
    assert.is_true(objs['CronJob/cozystack-migrations-dispatch'])
    assert.is_true(objs['ServiceAccount/cozystack-migrations-jobs'])
    -- a background slug without a record is the dispatcher's, not the hook's
    assert.is_nil(runner.records(ns)['bg-a'])
  end)

  it('renders the hook when a shipped pre-apply slug has no record', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, { ['m.up-a'] = rec('ok'), ['m.gone-x'] = rec('revoked') })
    assert.are.equal(3, has_hook(render(dir, ns), ns))
  end)

  it('renders the hook when a revoked slug has no record (the hook records it revoked)', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, { ['m.up-a'] = rec('ok'), ['m.up-b'] = rec('ok') })
    assert.are.equal(3, has_hook(render(dir, ns), ns))
  end)

  it('renders the hook for a slug to skip that is not recorded skipped yet, and not once it is', function()
    local ns = runner.new_ns()
    runner.make_ledger(ns, { ['m.up-a'] = rec('ok'), ['m.up-b'] = rec('ok'), ['m.gone-x'] = rec('revoked') })
    local skip = "--set 'migrations.skip={bg-a}' --set migrations.skipReason=why"
    assert.are.equal(3, has_hook(render(dir, ns, skip), ns))
    h.must(h.kubectl(string.format('patch configmap %s -n %s --type=merge -p %s', runner.LEDGER, ns,
      h.q(json.encode({ data = { ['m.bg-a'] = rec('skipped') } })))))
    assert.are.equal(0, has_hook(render(dir, ns, skip), ns))
    -- a skip of a slug recorded ok renders it, and the runner refuses it (exit 11)
    assert.are.equal(3, has_hook(render(dir, ns, "--set 'migrations.skip={up-a}' --set migrations.skipReason=why"), ns))
  end)
end)
