-- `cozy-migrate preview` against the real apiserver: the pending chain runs
-- dry, in order, each migration seeing what the earlier ones would have
-- done (a copy-on-write overlay of the apiserver's dry-run answers), and
-- nothing persists: no record, no Lease, no Event, no object's
-- resourceVersion moves. The last case previews the project's own
-- migrations on the fixtures they act on, runs them for real, and compares
-- the predicted objects with the real ones.
local h = require('support.helpers')
local fixture = require('support.fixture')
local runner = require('support.runner')
local cluster = require('support.cluster')
local json = require('json')

-- A tree of Lua migrations in one batch; bodies get NS as a local.
local function tree(ns, scripts, order, extra)
  local s = {}
  for slug, body in pairs(scripts) do
    s[slug] = type(body) == 'table' and body or
      { body = string.format("local kube = require('kube')\nlocal NS = %q\n%s", ns, body) }
  end
  for slug, v in pairs(extra or {}) do s[slug] = v end
  return fixture.tree({ batches = { { '00001-v1', order } }, scripts = s })
end

local function preview(dir, ns, ...)
  return h.cozy('preview', '--dir', dir, '--namespace', ns, ...)
end

local function preview_json(dir, ns)
  local res = preview(dir, ns, '-o', 'json')
  res.doc = json.decode(res.out)
  return res
end

-- Every resourceVersion in ns, and the ledger, Lease and Events there.
local function state(ns)
  local out = {}
  for _, kind in ipairs { 'configmaps', 'leases', 'events' } do
    for _, o in ipairs(h.kubectl_json('get ' .. kind .. ' -n ' .. ns).items) do
      out[kind .. '/' .. o.metadata.name] = o.metadata.resourceVersion
    end
  end
  return out
end

local function migration(doc, slug)
  for _, m in ipairs(doc.migrations) do if m.migration == slug then return m end end
end

local function changed(m)
  local out = {}
  for _, e in ipairs(m.journal and m.journal.entries or {}) do
    if e.changed then out[#out + 1] = e.verb .. ' ' .. (e.namespace and (e.namespace .. '/') or '') .. e.name end
  end
  table.sort(out)
  return out
end

describe('#e2e cozy-migrate preview', function()
  setup(h.need_cluster)
  teardown(runner.delete_namespaces)

  local function seeded()
    local ns = runner.new_ns()
    runner.make_ledger(ns, {})
    for i = 1, 3 do h.must(h.kubectl(string.format('create configmap c%d -n %s --from-literal=a=%d', i, ns, i))) end
    h.must(h.kubectl('label configmap c3 -n ' .. ns .. ' drop=me'))
    return ns
  end

  it('shows a later migration acting on what an earlier one changed, created and deleted', function()
    local ns = seeded()
    local dir = tree(ns, {
      label = [[
for _, n in ipairs { 'c1', 'c2' } do
  kube.patch('cm', n, { metadata = { labels = { picked = 'yes' } } }, { namespace = NS })
end
kube.patch('cm', 'c3', { metadata = { labels = { drop = json_null } } }, { namespace = NS })
kube.create('cm', { metadata = { name = 'made', labels = { picked = 'yes' } }, data = { x = '1' } }, { namespace = NS })
kube.delete('cm', 'c2', { namespace = NS })
]],
      use = [[
local seen = {}
for cm in kube.list('cm', { namespace = NS, label_selector = { picked = 'yes' } }) do
  seen[#seen + 1] = cm.metadata.name
  kube.patch('cm', cm.metadata.name, { data = { b = '2' } }, { namespace = NS })
end
table.sort(seen)
local dropped = 0
for _ in kube.list('cm', { namespace = NS, label_selector = 'drop' }) do dropped = dropped + 1 end
local made = kube.get('cm', 'made', { namespace = NS })
assert(made and made.data.x == '1', 'the created object is not seen')
assert(kube.get('cm', 'c2', { namespace = NS }) == nil, 'the deleted object is still seen')
local _, err = pcall(kube.patch, 'cm', 'c2', { data = { z = '1' } }, { namespace = NS })
assert(kube.is_not_found(err), 'a patch of the deleted object is not NotFound')
local obj, did = kube.update('cm', 'c1', function(o) o.data.u = 'updated' end, { namespace = NS })
assert(did and obj.data.b == '2', 'update did not see the earlier patch')
print(require('json').encode({ seen = seen, dropped = dropped }))
]],
    }, { 'label', 'use' })
    -- json.null in a patch removes a label
    h.write(dir .. '/migrations/pre-apply/label.lua', h.slurp(dir .. '/migrations/pre-apply/label.lua')
      :gsub('json_null', "require('json').null"))
    local before = state(ns)
    local res = preview_json(dir, ns)
    assert.are.equal(0, res.code, res.err)
    local printed = json.decode(res.err:match('%[use%] ({"[^\n]*})') or 'null')
    assert.are.same({ seen = { 'c1', 'made' }, dropped = 0 }, printed)
    local use = migration(res.doc, 'use')
    assert.are.equal('ok', use.outcome)
    assert.are.same({ 'patch ' .. ns .. '/c1', 'patch ' .. ns .. '/made', 'update ' .. ns .. '/c1' }, changed(use))
    local fields
    for _, e in ipairs(use.journal.entries) do
      if e.verb == 'update' then fields = e.fields end
    end
    assert.are.same({ 'data.u: (absent) -> "updated"' }, fields)
    assert.are.same({ { migration = 'label', state = 'ok' }, { migration = 'use', state = 'ok' } }, res.doc.records)
    assert.are.same(before, state(ns), 'the preview persisted something')
  end)

  it('predicts a write that fails validation only because of an earlier change', function()
    local ns = seeded()
    cluster.crds('limited')
    h.kapply({ apiVersion = 'spec.cozystack.io/v1', kind = 'Limited', metadata = { name = 'l1', namespace = ns },
      spec = { a = 1, b = 1 } })
    local dir = tree(ns, {
      raise = "kube.patch('limiteds.spec.cozystack.io', 'l1', { spec = { a = 8 } }, { namespace = NS })",
      more = "kube.patch('limiteds.spec.cozystack.io', 'l1', { spec = { b = 5 } }, { namespace = NS })",
    }, { 'raise', 'more' })
    local before = state(ns)
    local res = preview_json(dir, ns)
    assert.are.same(before, state(ns), 'the preview persisted something')
    assert.are.equal(1, res.code, res.out .. res.err)
    local more = migration(res.doc, 'more')
    assert.are.equal('failed', more.outcome)
    assert.matches('a %+ b must stay at most 10', more.message)
    assert.is_true(more.stops_upgrade)
    assert.are.equal('more', res.doc.stops_at)
    -- on its own, the second write is valid
    h.must(h.cozy('lua', '--dry-run', h.write(h.tmpdir() .. '/m.lua', string.format(
      "require('kube').patch('limiteds.spec.cozystack.io', 'l1', { spec = { b = 5 } }, { namespace = %q })", ns))))
  end)

  it('stops at an on-error=abort failure, naming it, and previews nothing after it', function()
    local ns = seeded()
    local dir = tree(ns, {
      first = "kube.patch('cm', 'c1', { data = { f = '1' } }, { namespace = NS })",
      broken = "error('not today')",
      after = "kube.patch('cm', 'c1', { data = { g = '1' } }, { namespace = NS })",
    }, { 'first', 'broken', 'after' })
    local before = state(ns)
    local res = preview(dir, ns)
    assert.are.same(before, state(ns), 'the preview persisted something')
    assert.are.equal(1, res.code, res.err)
    h.contains(res.out, '[2/3] broken ... would FAIL (ScriptError: ')
    h.contains(res.out, 'the upgrade would stop here')
    h.contains(res.out, 'the run would stop at broken (on-error=abort): exit 1')
    h.lacks(res.out, '[3/3]')
  end)

  it('previews a shell migration through the runner\'s gateway, and what follows it with its effects', function()
    local ns = seeded()
    local dir = tree(ns, { lua = "kube.patch('cm', 'c1', { data = { l = '1' } }, { namespace = NS })" },
      { 'sh', 'lua' }, { sh = { shell = true, body = 'echo no cluster work >/dev/null' } })
    local before = state(ns)
    local res = preview_json(dir, ns)
    assert.are.same(before, state(ns), 'the preview persisted something')
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('ok', migration(res.doc, 'sh').outcome)
    assert.are_not.equal('sh', res.doc.predicted_without_effects_from)
    assert.are.equal('ok', migration(res.doc, 'lua').outcome)
    res = preview(dir, ns)
    h.contains(res.out, 'sh ... ok')
    h.lacks(res.out, 'predicted without its effects')
  end)

  it('predicts the steps run takes with SKIP set: the same slugs run, the same recorded skipped', function()
    local ns = seeded()
    local body = "kube.patch('cm', 'c1', { data = { [%q] = '1' } }, { namespace = NS })"
    local dir = tree(ns, { a = body:format('a'), b = body:format('b'), c = body:format('c') },
      { 'a', 'b', 'c' })
    local env = { env = { SKIP = 'b', SKIP_REASON = 'not on this cluster' } }
    local res = preview(dir, ns, '-o', 'json', env)
    assert.are.equal(0, res.code, res.err)
    local doc = json.decode(res.out)
    local predicted, order = {}, {}
    for _, m in ipairs(doc.migrations) do
      predicted[#predicted + 1] = m.migration .. ' ' .. m.outcome
      order[#order + 1] = m.migration
    end
    -- the operator's skip is recorded before the walk, as plan shows run's steps
    assert.are.same({ 'b skipped', 'a ok', 'c ok' }, predicted)
    local planned = {}
    for line in h.must(runner.plan(dir, ns, env)).out:gmatch('[^\n]+') do
      local f = {}
      for w in line:gmatch('%S+') do f[#f + 1] = w end
      if f[4] == 'a' or f[4] == 'b' or f[4] == 'c' then planned[#planned + 1] = f[4] end
    end
    assert.are.same(planned, order)
    local would = {}
    for _, r in ipairs(doc.records) do would[#would + 1] = r.migration .. ' ' .. r.state end
    assert.are.same({ 'b skipped', 'a ok', 'c ok' }, would)
    -- the run, told the same, does what the preview said
    h.must(runner.run(dir, ns, env))
    local ran = {}
    for slug, r in pairs(runner.records(ns)) do ran[#ran + 1] = slug .. ' ' .. r.state end
    table.sort(ran)
    assert.are.same({ 'a ok', 'b skipped', 'c ok' }, ran)
    assert.are.equal('Operator', runner.records(ns).b.reason)
  end)

  it('takes -o text as its help says, the same report as without it', function()
    local ns = seeded()
    local dir = tree(ns, { one = "kube.patch('cm', 'c1', { data = { t = '1' } }, { namespace = NS })" },
      { 'one' })
    local plain, text = preview(dir, ns), preview(dir, ns, '-o', 'text')
    assert.are.equal(0, text.code, text.err)
    assert.are.equal(plain.out:gsub('%(%d+ ms%)', ''), text.out:gsub('%(%d+ ms%)', ''))
    h.contains(text.out, 'the run would succeed')
    local bad = preview(dir, ns, '-o', 'table')
    assert.are.equal(2, bad.code)
    h.contains(bad.err, "'table' is not text or json")
  end)

  it('keeps its overlay under TMPDIR', function()
    local ns = seeded()
    local dir = tree(ns, { one = "return" }, { 'one' })
    local res = preview(dir, ns, { env = { TMPDIR = '/nonexistent-tmp' } })
    assert.are.equal(1, res.code)
    h.contains(res.err, 'cannot make a private directory in /nonexistent-tmp')
  end)

  it('says so when there is nothing to run', function()
    local ns = seeded()
    local dir = tree(ns, { done = "return" }, { 'done' })
    h.must(runner.run(dir, ns))
    local res = preview(dir, ns)
    assert.are.equal(0, res.code, res.err)
    h.contains(res.out, 'nothing to run for the pre-apply tier')
    h.contains(res.out, 'the run would succeed')
    res = preview_json(dir, ns)
    assert.are.same({}, res.doc.migrations)
  end)

  it('refuses a selector it cannot evaluate on what it holds instead of guessing', function()
    local ns = seeded()
    local dir = tree(ns, {
      pod = [[kube.create('pods', { metadata = { name = 'p1' },
        spec = { containers = { { name = 'c', image = 'busybox' } } } }, { namespace = NS })]],
      odd = "for _ in kube.list('pods', { namespace = NS, field_selector = 'status.phase=Pending' }) do end",
    }, { 'pod', 'odd' })
    local before = state(ns)
    local res = preview_json(dir, ns)
    -- a prediction it cannot make is no failure of the run
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.equal('unpredictable', migration(res.doc, 'odd').outcome)
    assert.matches('cannot evaluate the field selector', migration(res.doc, 'odd').message)
    assert.are.same(before, state(ns), 'the preview persisted something')
  end)

  it('reports a strategic merge on an object it changed as unpredictable, not as the run stopping', function()
    local ns = seeded()
    local dir = tree(ns, {
      first = "kube.patch('cm', 'c1', { data = { f = '1' } }, { namespace = NS })",
      second = "kube.patch('cm', 'c1', { data = { s = '2' } }, { namespace = NS, type = 'strategic' })",
      third = "kube.patch('cm', 'c2', { data = { t = '3' } }, { namespace = NS })",
    }, { 'first', 'second', 'third' })
    local before = state(ns)
    local res = preview_json(dir, ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    local second = migration(res.doc, 'second')
    assert.are.equal('unpredictable', second.outcome)
    assert.matches('strategic', second.message)
    assert.is_nil(second.stops_upgrade)
    assert.are.equal('ok', migration(res.doc, 'third').outcome)
    assert.are.equal('second', res.doc.predicted_without_effects_from)
    assert.are.equal(json.null, res.doc.stops_at)
    assert.are.same(before, state(ns), 'the preview persisted something')
    res = preview(dir, ns)
    h.contains(res.out, '[2/3] second ... unpredictable: ')
    h.contains(res.out, 'the run would succeed as far as the preview can tell: second could not be predicted')
    -- and the real run does succeed
    h.must(runner.run(dir, ns))
    assert.are.equal('2', h.kubectl_json('get cm c1 -n ' .. ns).data.s)
  end)

  it('refuses a TokenRequest, whose dry-run answer is a live token, and calls the migration unpredictable', function()
    local ns = seeded()
    h.must(h.kubectl('create serviceaccount robot -n ' .. ns))
    local dir = tree(ns, {
      token = [[
local t = kube.create('serviceaccounts', { apiVersion = 'authentication.k8s.io/v1', kind = 'TokenRequest',
  spec = { audiences = { 'x' } } }, { namespace = NS, subresource = 'robot/token' })
print('got ' .. tostring(t and t.status and t.status.token))
]] }, { 'token' })
    local before = state(ns)
    local res = preview_json(dir, ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    local m = migration(res.doc, 'token')
    assert.are.equal('unpredictable', m.outcome)
    assert.matches('live credential', m.message)
    h.lacks(res.err, 'got ', 'the script went on with a token')
    assert.are.same(before, state(ns))
  end)

  it('judges the create it makes of a rename, and refuses one that would name the ledger', function()
    local ns = seeded()
    local dir = tree(ns, {
      rename = [[
kube.create('cm', { metadata = { name = 'scratch' }, data = { x = '1' } }, { namespace = NS })
-- in the overlay, scratch was created by this preview: its rename goes out as a create
local ok, err = pcall(kube.patch, 'cm', 'scratch', { metadata = { name = 'cozystack-version' } }, { namespace = NS })
print('rename: ' .. tostring(ok) .. ' ' .. tostring(type(err) == 'table' and err.reason or err))
]] }, { 'rename' })
    local before = state(ns)
    local res = h.cozy('preview', '--dir', dir, '--namespace', ns)
    assert.are.equal(0, res.code, res.out .. res.err)
    h.contains(res.err, '[rename] rename: false LedgerProtected')
    assert.are.same(before, state(ns))
  end)

  it('survives a finalizer that writes the object the preview is handing out', function()
    local ns = seeded()
    local dir = tree(ns, {
      gc = [[
local data = {}
for i = 1, 300 do data['k' .. i] = string.rep('v', 50) end
kube.patch('cm', 'c1', { data = data }, { namespace = NS }) -- c1 is now the overlay's
local n = 0
local function arm()
  if n >= 300 then return end
  setmetatable({}, { __gc = function()
    n = n + 1
    pcall(kube.patch, 'cm', 'c1', { data = { a = tostring(n) } }, { namespace = NS })
    arm()
  end })
end
for _ = 1, 20 do arm() end
for _ = 1, 3000 do assert(kube.get('cm', 'c1', { namespace = NS }).data.k1) end
print('finalizers ' .. n)
]] }, { 'gc' })
    local before = state(ns)
    local res = preview_json(dir, ns)
    assert.are.equal(0, res.code, 'never a crash: ' .. res.err:sub(-600))
    assert.are.equal('ok', migration(res.doc, 'gc').outcome)
    assert.is_true(tonumber(res.err:match('finalizers (%d+)')) > 0, 'no finalizer ran, so nothing was tried')
    assert.are.same(before, state(ns))
  end)

  it("predicts the objects the project's own migrations then really produce", function()
    cluster.crds('kuberneteses', 'redisfailovers', 'clusters-cnpg', 'helmreleases', 'clickhousekeeperinstallations')
    local ns = cluster.namespace('pv-real')
    local ledger = runner.new_ns()
    runner.make_ledger(ledger, {})
    for _, f in ipairs { 'redis-failovers.yaml', 'kuberneteses.yaml', 'cnpg-clusters.yaml',
      'tenant-fluxcd-helmreleases.yaml', 'clickhouse-keepers.yaml' } do
      cluster.apply('migrations/' .. f, ns)
    end
    local dir = h.tmpdir()
    h.must(h.run(string.format('cp -r %s/migrations %s/legacy-sh %s/', h.q(h.root), h.q(h.root), h.q(dir))))
    h.must(h.run('rm -rf ' .. h.q(dir .. '/migrations/order.d') .. ' && mkdir ' .. h.q(dir .. '/migrations/order.d')))
    local slugs = h.must(h.run(string.format('cd %s && ls migrations/pre-apply migrations/background', h.q(dir)))).out
    local list = {}
    for slug in slugs:gmatch('([%w-]+)%.lua') do list[#list + 1] = slug end
    table.sort(list)
    h.write(dir .. '/migrations/order.d/99999-untagged', table.concat(list, '\n') .. '\n')
    local res = h.cozy('preview', '--dir', dir, '--namespace', ledger, '-o', 'json')
    assert.are.equal(0, res.code, res.err)
    local doc = json.decode(res.out)
    local predicted = {}
    for _, o in ipairs(doc.objects) do
      if o.path:find('/namespaces/' .. ns .. '/', 1, true) then predicted[#predicted + 1] = o end
    end
    assert.is_true(#predicted >= 5, 'the preview predicted too few changes: ' .. #predicted)
    h.must(h.cozy('run', '--dir', dir, '--namespace', ledger))
    local function strip(o)
      local m = o.metadata
      for _, k in ipairs { 'resourceVersion', 'uid', 'creationTimestamp', 'managedFields', 'generation' } do
        m[k] = nil
      end
      if m.annotations then m.annotations['reconcile.fluxcd.io/requestedAt'] = nil end
      return o
    end
    for _, o in ipairs(predicted) do
      local real = h.kubectl('get --raw ' .. h.q(o.path))
      if o.deleted then
        assert.are_not.equal(0, real.code, o.path .. ' was predicted deleted')
      else
        assert.are.equal(0, real.code, o.path .. ': ' .. real.err)
        assert.are.same(strip(o.object), strip(json.decode(real.out)), o.path)
      end
    end
  end)
end)
