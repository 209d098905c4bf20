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

local function entry(slug, timeout)
  return { slug = slug, timeout_s = timeout or 600, on_error = 'abort', requires = json.array({}) }
end

-- The chart with an index of its own: pre-apply up-a (5 min), up-b (20
-- min); background bg-a; revoked gone-x.
local function chart()
  local dir = h.tmpdir()
  h.must(h.run(string.format('cp -R %s/. %s/', h.q(CHART), h.q(dir))))
  h.write(dir .. '/files/cozy-migrate-index.json', json.encode({ version = 2, image = json.null,
    ['pre-apply'] = { entry('up-a', 300), entry('up-b', 1200) },
    background = { { slug = 'bg-a', timeout_s = 600, on_error = 'warn', requires = json.array({}) } },
    revoked = { 'gone-x' } }))
  return dir
end

local function helm_template(dir, ns, extra)
  return h.must(h.run(string.format('%s template lane %s -n %s --dry-run=server %s', h.q(HELM), h.q(dir), ns,
    extra or '')), 'helm template --dry-run=server').out
end

-- What helm renders against the cluster in KUBECONFIG: {Kind/name = true}.
local function render(dir, ns, extra)
  local out = {}
  for k, n in helm_template(dir, ns, extra):gmatch('\nkind: (%w+)\nmetadata:\n  name: ([%w%-]+)') do
    out[k .. '/' .. n] = true
  end
  return out
end

-- The hook Job helm renders against the cluster, decoded.
local function hook_job(dir, ns, extra)
  local text = helm_template(dir, ns, '--show-only templates/migrations-hook.yaml ' .. (extra or ''))
  for doc in ('\n' .. text .. '\n---\n'):gmatch('\n(.-)\n%-%-%-') do
    local d = require('yaml').decode(doc)
    if type(d) == 'table' and d.kind == 'Job' then return d end
  end
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

  it('gives the hook a deadline from the index\'s timeouts of the pre-apply slugs it may run (no hand-kept total)', function()
    local wait = 660 -- the lock wait: lockTimeoutSeconds 300, at least bg-a's 600 s + 60
    -- no ledger (a fresh install, or nothing to look at): every pre-apply slug counts
    local ns = runner.new_ns()
    local job = hook_job(dir, ns)
    assert.are.equal('1500', job.metadata.annotations['platform.cozystack.io/migrations-timeout-seconds'])
    assert.are.equal(wait + 300 + 1200 + 60, job.spec.activeDeadlineSeconds)
    -- up-a recorded: only up-b's 20 minutes are left to run
    runner.make_ledger(ns, { ['m.up-a'] = rec('ok') })
    job = hook_job(dir, ns)
    assert.are.equal('1200', job.metadata.annotations['platform.cozystack.io/migrations-timeout-seconds'])
    assert.are.equal(wait + 1200 + 60, job.spec.activeDeadlineSeconds)
    -- the index the hook decides on goes with it, naming the release's image
    local env = {}
    for _, e in ipairs(job.spec.template.spec.containers[1].env) do env[e.name] = e.value end
    local ix = json.decode(env.MIGRATIONS_INDEX)
    assert.are.equal(env.MIGRATIONS_IMAGE, ix.image)
    assert.are.same({ 'up-a', 'up-b' }, { ix['pre-apply'][1].slug, ix['pre-apply'][2].slug })
  end)
end)

-- The hook's runner against the index it was rendered from (env
-- MIGRATIONS_INDEX): a chart whose index disagrees with the image fails the
-- upgrade before anything runs, exit 9, one line per difference and an
-- Event; one that agrees runs as ever.
describe('#e2e the hook checks the index it was rendered from', function()
  local fixture = require('support.fixture')
  local IMAGE = 'reg.example/platform@sha256:' .. string.rep('ab', 32)
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  local function tree(ns)
    return fixture.tree({
      batches = { { '00001-v1.0.0', { 'up-a', 'up-b' } } },
      scripts = { ['up-a'] = { body = runner.lua_marker(ns, 'up-a') }, ['up-b'] = { timeout = '20m', body = runner.lua_marker(ns, 'up-b') } },
    })
  end

  local function index_of(dir, image)
    return json.decode(h.must(h.cozy('index', '--dir', dir, '--image', image or IMAGE)).out)
  end

  local function hook(dir, ns, ix)
    return runner.run(dir, ns, '--tier', 'pre-apply', { env = { MIGRATIONS_IMAGE = IMAGE, MIGRATIONS_INDEX = json.encode(ix) } })
  end

  it('runs as ever when the index agrees with its tree and image', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    local res = h.must(hook(dir, ns, index_of(dir)))
    h.contains(res.out, 'up-a')
    assert.are.equal('ok', runner.records(ns)['up-a'].state)
  end)

  it('fails before anything runs (exit 9, nothing recorded, an Event naming each slug) when the index omits a pending slug or names one the image lacks', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    runner.make_ledger(ns, {})
    local ix = index_of(dir)
    table.remove(ix['pre-apply'], 2)                                   -- omits up-b: the gate would render no hook for it
    table.insert(ix['pre-apply'], { slug = 'up-ghost', timeout_s = 600, on_error = 'abort', requires = json.array({}) })
    local res = hook(dir, ns, ix)
    assert.are.equal(9, res.code, res.out .. res.err)
    h.contains(res.err, "MIGRATIONS_INDEX: pre-apply slug 'up-b' is shipped by the tree")
    h.contains(res.err, "MIGRATIONS_INDEX: pre-apply slug 'up-ghost' is in the index but the tree")
    h.contains(res.err, 'nothing ran (exit 9)')
    assert.are.same({}, runner.records(ns))
    assert.are.same({}, runner.markers(ns))
    local ev = {}
    for _, e in ipairs(runner.events(ns)) do if e.reason == 'MigrationsIndexMismatch' then ev[#ev + 1] = e end end
    assert.are.equal(1, #ev)
    assert.are.equal('cozystack-version', ev[1].involvedObject.name)
    h.contains(ev[1].message, 'up-b')
    h.contains(ev[1].message, 'up-ghost')
  end)

  it('fails on a fresh install too, before it seeds the ledger; and on an index of another image or timeout', function()
    local ns = runner.new_ns()
    local dir = tree(ns)
    local ix = index_of(dir)
    ix['pre-apply'][2].timeout_s = 60
    local res = hook(dir, ns, ix)
    assert.are.equal(9, res.code, res.out .. res.err)
    h.contains(res.err, "pre-apply slug 'up-b': timeout 60s in the index, 1200s in the tree")
    assert.are.equal(1, h.kubectl('get configmap cozystack-version -n ' .. ns).code, 'the ledger was seeded')
    res = hook(dir, ns, index_of(dir, 'reg.example/other:v2'))
    assert.are.equal(9, res.code)
    h.one_line(res.err, 'stderr')
    h.contains(res.err, "the index names the image 'reg.example/other:v2', not the '" .. IMAGE .. "'")
    -- one it cannot read whole is refused as bad input (exit 3)
    res = runner.run(dir, ns, { env = { MIGRATIONS_IMAGE = IMAGE, MIGRATIONS_INDEX = json.encode(index_of(dir)) .. '{}' } })
    assert.are.equal(3, res.code)
    h.contains(res.err, 'MIGRATIONS_INDEX: a second object at byte offset')
  end)
end)
