-- stdlib/helm.lua against the real apiserver: the specs call the module in
-- the spec process (same kube module, same cluster as KUBECONFIG) and check
-- what it did with kubectl. kube.core.requests() counts every HTTP request
-- sent, so "no request" is measured, not assumed.
local h = require('support.helpers')
local cluster = require('support.cluster')
local json = require('json')
local kube = require('kube')
local core = require('kube.core')
local helm = require('helm')

local NS

local function cm(name, meta)
  local m = { name = name, namespace = NS }
  for k, v in pairs(meta or {}) do m[k] = v end
  cluster.apply({ apiVersion = 'v1', kind = 'ConfigMap', metadata = m })
end

local function kget(name) return cluster.get('configmap', name, NS) end

-- requests(fn) -> how many HTTP requests fn sent, discovery already warm.
local function requests(fn)
  kube.resource('configmaps')
  kube.resource('secrets')
  local before = core.requests()
  fn()
  return core.requests() - before
end

describe('#e2e helm.adopt', function()
  setup(function()
    assert.is_true(h.has_cluster(), 'KUBECONFIG must point at a cluster (tools/run-tests sets it)')
    NS = cluster.namespace('helm')
  end)
  teardown(function() cluster.cleanup('configmaps', 'secrets') end)

  it('writes the release annotations and the managed-by label in one request after the read', function()
    cm('plain', { labels = { app = 'x' }, annotations = { note = 'kept' } })
    local obj, changed
    local n = requests(function()
      obj, changed = helm.adopt('configmaps', 'plain', { namespace = NS, release = 'rel' })
    end)
    assert.are.equal(2, n) -- the GET and one PATCH
    assert.is_true(changed)
    local got = kget('plain').metadata
    assert.are.same({ ['meta.helm.sh/release-name'] = 'rel', ['meta.helm.sh/release-namespace'] = NS,
      note = 'kept' }, got.annotations)
    assert.are.same({ app = 'x', ['app.kubernetes.io/managed-by'] = 'Helm' }, got.labels)
    assert.are.equal(got.resourceVersion, obj.metadata.resourceVersion)
  end)

  it('sends no request at all for an object given that is already adopted', function()
    cm('done', {
      labels = { ['app.kubernetes.io/managed-by'] = 'Helm' },
      annotations = { ['meta.helm.sh/release-name'] = 'rel', ['meta.helm.sh/release-namespace'] = NS },
    })
    local obj = kube.get('configmaps', 'done', { namespace = NS })
    local rv = obj.metadata.resourceVersion
    local changed
    assert.are.equal(0, requests(function()
      _, changed = helm.adopt('configmaps', obj, { release = 'rel' })
    end))
    assert.is_false(changed)
    assert.are.equal(1, requests(function() -- by name: the read only
      _, changed = helm.adopt('configmaps', 'done', { namespace = NS, release = 'rel' })
    end))
    assert.is_false(changed)
    assert.are.equal(rv, kget('done').metadata.resourceVersion)
  end)

  it('patches only the metadata that differs', function()
    local obj = { metadata = {
      labels = { ['app.kubernetes.io/managed-by'] = 'Helm' },
      annotations = { ['meta.helm.sh/release-name'] = 'rel', ['meta.helm.sh/release-namespace'] = 'elsewhere',
        ['helm.sh/resource-policy'] = 'keep' },
    } }
    assert.are.same({ metadata = { annotations = { ['meta.helm.sh/release-namespace'] = NS } } },
      helm.patch_for(obj, 'rel', NS, true))
    assert.are.same({ metadata = { labels = { ['app.kubernetes.io/managed-by'] = 'Helm' } } },
      helm.patch_for({ metadata = { annotations = obj.metadata.annotations } }, 'rel', 'elsewhere', false))
    assert.is_nil(helm.patch_for(obj, 'rel', 'elsewhere', false))
  end)

  it('moves an object owned by another release to the one asked for', function()
    cm('moved', {
      labels = { ['app.kubernetes.io/managed-by'] = 'Helm' },
      annotations = { ['meta.helm.sh/release-name'] = 'old', ['meta.helm.sh/release-namespace'] = NS },
    })
    helm.adopt('configmaps', 'moved', { namespace = NS, release = 'new', release_namespace = 'cozy-system' })
    assert.are.same({ 'new', 'cozy-system' }, { helm.owner(kget('moved')) })
  end)

  it('adds helm.sh/resource-policy=keep when asked, and never removes it when not', function()
    cm('keep')
    helm.adopt('configmaps', 'keep', { namespace = NS, release = 'rel', keep = true })
    assert.are.equal('keep', kget('keep').metadata.annotations['helm.sh/resource-policy'])
    local _, changed = helm.adopt('configmaps', 'keep', { namespace = NS, release = 'rel' })
    assert.is_false(changed)
    assert.are.equal('keep', kget('keep').metadata.annotations['helm.sh/resource-policy'])
  end)

  it('adopts a cluster-scoped object into the release namespace given', function()
    local ns = cluster.namespace('helm-adopted')
    helm.adopt('namespaces', ns, { release = 'tenant', release_namespace = 'cozy-system' })
    assert.are.same({ 'tenant', 'cozy-system' }, { helm.owner(cluster.get('namespace', ns)) })
  end)

  it('refuses a cluster-scoped object without a release namespace', function()
    local ok, err = pcall(helm.adopt, 'namespaces', 'default', { release = 'x' })
    assert.is_false(ok)
    assert.matches('release_namespace is required', err)
  end)

  it('raises a NotFound error value for a missing object', function()
    local ok, err = pcall(helm.adopt, 'configmaps', 'no-such', { namespace = NS, release = 'rel' })
    assert.is_false(ok)
    assert.is_true(kube.is_not_found(err))
    assert.are.equal('NotFound', err.reason)
    assert.matches('no%-such', err.message)
  end)

  it('raises the apiserver error when the patch is refused, and changes nothing', function()
    cm('frozen', { labels = { ['cozy-migrate.spec/frozen'] = NS } })
    local p = cluster.deny { resource = 'configmaps', selector = { ['cozy-migrate.spec/frozen'] = NS },
      message = 'frozen by policy', probe = { name = 'frozen', namespace = NS } }
    local rv = kget('frozen').metadata.resourceVersion
    local ok, err = pcall(helm.adopt, 'configmaps', 'frozen', { namespace = NS, release = 'rel' })
    cluster.allow(p)
    assert.is_false(ok)
    assert.is_true(kube.is_forbidden(err), tostring(err))
    assert.matches('frozen by policy', err.message, 1, true)
    assert.are.equal(rv, kget('frozen').metadata.resourceVersion)
  end)
end)

describe('helm.owner', function()
  it('returns the release and its namespace from the annotations', function()
    assert.are.same({ 'r', 'ns' }, { helm.owner({ metadata = { annotations = {
      ['meta.helm.sh/release-name'] = 'r', ['meta.helm.sh/release-namespace'] = 'ns' } } }) })
  end)

  it('returns the release alone when its namespace is not annotated', function()
    local r, ns = helm.owner({ metadata = { annotations = { ['meta.helm.sh/release-name'] = 'r' } } })
    assert.are.equal('r', r)
    assert.is_nil(ns)
  end)

  it('returns nil for an object no release owns', function()
    assert.is_nil(helm.owner({ metadata = {} }))
    assert.is_nil(helm.owner({ metadata = { annotations = { ['meta.helm.sh/release-name'] = '' } } }))
    assert.is_nil(helm.owner({ metadata = { annotations = { other = 'x' } } }))
  end)
end)

describe('#e2e helm.handover', function()
  local RN, RNS, MB, KEEP = 'meta.helm.sh/release-name', 'meta.helm.sh/release-namespace',
    'app.kubernetes.io/managed-by', 'helm.sh/resource-policy'

  -- owned(name, release [, extra annotations]): a ConfigMap as Helm leaves
  -- one it installed (the label and both annotations), owned by release.
  local function owned(name, release, extra)
    local ann = { [RN] = release, [RNS] = NS }
    for k, v in pairs(extra or {}) do ann[k] = v end
    cm(name, { labels = { [MB] = 'Helm' }, annotations = ann })
  end
  local function ann(name) return kget(name).metadata.annotations or {} end
  local function rv(name) return kget(name).metadata.resourceVersion end

  -- refused(fn) -> the error value fn raised (it must raise one)
  local function refused(fn)
    local ok, err = pcall(fn)
    assert.is_false(ok, 'expected a refusal')
    assert.is_true(kube.is_error(err), 'not an error value: ' .. tostring(err))
    return err
  end

  setup(function() NS = cluster.namespace('helm-handover') end)
  teardown(function() cluster.cleanup('configmaps') end)

  it("moves an object owned by `from` to `to` in one patch, keeping it, and touches nothing else", function()
    owned('system-owned', 'foo-system', { note = 'stays' })
    local obj, changed
    local n = requests(function()
      obj, changed = helm.handover('configmaps', 'system-owned',
        { namespace = NS, from = 'foo-system', to = 'foo-db', keep = true })
    end)
    assert.are.equal(3, n) -- the GET, the list of foo-system's storage (none: no release to outlive), one PATCH
    assert.is_true(changed)
    local got = kget('system-owned').metadata
    assert.are.same({ [RN] = 'foo-db', [RNS] = NS, [KEEP] = 'keep', note = 'stays' }, got.annotations)
    assert.are.same({ [MB] = 'Helm' }, got.labels)
    assert.are.equal(got.resourceVersion, obj.metadata.resourceVersion)
  end)

  it('moves the release namespace too when to_namespace is given', function()
    owned('moved-ns', 'old')
    helm.handover('configmaps', 'moved-ns', { namespace = NS, from = 'old', to = 'new', to_namespace = 'cozy-system' })
    assert.are.same({ 'new', 'cozy-system' }, { helm.owner(kget('moved-ns')) })
    assert.is_nil(ann('moved-ns')[KEEP])
  end)

  it('is a no-op once handed over: no request for an object given, one read for a name', function()
    owned('done', 'foo-db', { [KEEP] = 'keep' })
    local before = rv('done')
    local obj = kube.get('configmaps', 'done', { namespace = NS })
    local changed
    assert.are.equal(0, requests(function()
      _, changed = helm.handover('configmaps', obj, { from = 'foo-system', to = 'foo-db', keep = true })
    end))
    assert.is_false(changed)
    assert.are.equal(1, requests(function()
      _, changed = helm.handover('configmaps', 'done', { namespace = NS, from = 'foo-system', to = 'foo-db', keep = true })
    end))
    assert.is_false(changed)
    assert.are.equal(before, rv('done'))
  end)

  it('adds only the missing keep to an object `to` already owns', function()
    owned('db-nokeep', 'foo-db')
    local _, changed = helm.handover('configmaps', 'db-nokeep', { namespace = NS, from = 'foo-system', to = 'foo-db', keep = true })
    assert.is_true(changed)
    assert.are.same({ [RN] = 'foo-db', [RNS] = NS, [KEEP] = 'keep' }, ann('db-nokeep'))
    -- and never removes a keep when not asked
    _, changed = helm.handover('configmaps', 'db-nokeep', { namespace = NS, from = 'foo-system', to = 'foo-db' })
    assert.is_false(changed)
    assert.are.equal('keep', ann('db-nokeep')[KEEP])
  end)

  it('refuses a third owner with an error value naming it, before any write', function()
    owned('third', 'postgres-apps')
    local before = rv('third')
    local obj = kube.get('configmaps', 'third', { namespace = NS })
    local err
    assert.are.equal(0, requests(function()
      err = refused(function() helm.handover('configmaps', obj, { from = 'foo-system', to = 'foo-db', keep = true }) end)
    end))
    assert.are.same({ 0, 'OwnedByAnother', 'postgres-apps', NS }, { err.code, err.reason, err.owner, err.owner_namespace })
    assert.matches(NS .. "/third is owned by release 'postgres-apps'", err.message, 1, true)
    assert.matches("neither 'foo-system' nor 'foo-db'", err.message, 1, true)
    assert.are.equal(before, rv('third'))
  end)

  it('judges the release namespace too when from_namespace is given', function()
    owned('other-ns', 'foo-system') -- release-namespace NS
    local err = refused(function()
      helm.handover('configmaps', 'other-ns', { namespace = NS, from = 'foo-system', from_namespace = 'cozy-system', to = 'foo-db' })
    end)
    assert.are.equal('OwnedByAnother', err.reason)
    assert.are.equal('foo-system', ann('other-ns')[RN])
  end)

  it('refuses an object nobody owns unless asked, and then adopts it into `to`', function()
    cm('nobody', { labels = { app = 'x' } })
    local before = rv('nobody')
    local err = refused(function() helm.handover('configmaps', 'nobody', { namespace = NS, from = 'a', to = 'b' }) end)
    assert.are.same({ 0, 'NotOwned' }, { err.code, err.reason })
    assert.matches('opts.unowned = true', err.message, 1, true)
    assert.are.equal(before, rv('nobody'))
    local _, changed = helm.handover('configmaps', 'nobody', { namespace = NS, from = 'a', to = 'b', unowned = true, keep = true })
    assert.is_true(changed)
    local got = kget('nobody').metadata
    assert.are.same({ [RN] = 'b', [RNS] = NS, [KEEP] = 'keep' }, got.annotations)
    assert.are.same({ app = 'x', [MB] = 'Helm' }, got.labels)
  end)

  it('re-reads and judges again when the object changed since it was read: a new third owner is refused', function()
    owned('raced', 'foo-system')
    local stale = kube.get('configmaps', 'raced', { namespace = NS })
    h.must(h.kc(string.format('annotate --overwrite configmap raced -n %s %s=intruder', NS, RN)))
    local err
    local n = requests(function()
      err = refused(function() helm.handover('configmaps', stale, { from = 'foo-system', to = 'foo-db' }) end)
    end)
    assert.are.equal(2, n) -- the PATCH refused with a Conflict, the read again
    assert.are.same({ 'OwnedByAnother', 'intruder' }, { err.reason, err.owner })
    assert.are.equal('intruder', ann('raced')[RN])
  end)

  it('re-reads and hands over when what changed since the read is something else', function()
    owned('raced-ok', 'foo-system')
    local stale = kube.get('configmaps', 'raced-ok', { namespace = NS })
    h.must(h.kc(string.format('label configmap raced-ok -n %s added=meanwhile', NS)))
    local obj, changed = helm.handover('configmaps', stale, { from = 'foo-system', to = 'foo-db' })
    assert.is_true(changed)
    assert.are.equal('foo-db', ann('raced-ok')[RN])
    assert.are.equal('meanwhile', obj.metadata.labels.added)
  end)

  it('raises NotFound for a missing object, and a plain string for a wrong call', function()
    local err = refused(function() helm.handover('configmaps', 'no-such', { namespace = NS, from = 'a', to = 'b' }) end)
    assert.is_true(kube.is_not_found(err))
    for _, case in ipairs({
      { { to = 'b' }, 'opts.from' }, { { from = 'a' }, 'opts.to' }, { { from = 'a', to = 'a' }, 'the same release' },
    }) do
      local ok, msg = pcall(helm.handover, 'configmaps', 'x', case[1])
      assert.is_false(ok)
      assert.are.equal('string', type(msg))
      assert.matches(case[2], msg, 1, true)
    end
  end)

  it('gives the patch it would send, without sending it', function()
    local obj = { metadata = { name = 'p', namespace = NS, annotations = { [RN] = 'a', [RNS] = NS } } }
    assert.are.same({ metadata = { annotations = { [RN] = 'b', [KEEP] = 'keep' } } },
      helm.handover_patch(obj, { from = 'a', to = 'b', keep = true }))
    assert.is_nil(helm.handover_patch(obj, { from = 'x', to = 'a' }))
    local patch, err = helm.handover_patch(obj, { from = 'x', to = 'y' })
    assert.is_nil(patch)
    assert.are.equal('OwnedByAnother', err.reason)
  end)
end)

-- The hand-over the stdlib exists for, with real helm (tools/testenv build
-- helm) against the same apiserver: release A installed a ConfigMap, the
-- migration hands it to release B with keep; then A is removed. Helm's
-- uninstall deletes what A's stored manifest lists and reads keep from
-- that manifest only (pkg/action/uninstall.go, filterManifestsToKeep), so
-- the live keep alone does not save it.
describe('#e2e helm.handover and the removal of release A (real helm)', function()
  local HELM = h.root .. '/build/testenv/bin/helm'
  local function helm_cli(args)
    return h.run(string.format('%s %s -n %s', h.q(HELM), args, NS))
  end
  -- a chart of release A: ConfigMaps named in `names`
  local function chart(names)
    local dir = h.tmpdir()
    h.write(dir .. '/Chart.yaml', 'apiVersion: v2\nname: release-a\nversion: 0.1.0\n')
    local docs = {}
    for _, n in ipairs(names) do
      docs[#docs + 1] = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ' .. n .. '\ndata:\n  from: release-a\n'
    end
    h.must(h.run('mkdir -p ' .. h.q(dir .. '/templates')))
    h.write(dir .. '/templates/objects.yaml', table.concat(docs, '---\n'))
    return dir
  end
  local function exists(name) return kube.get('configmaps', name, { namespace = NS }) ~= nil end

  setup(function()
    h.must(h.run(h.q(h.testenv) .. ' build helm'), 'tools/testenv build helm')
    NS = cluster.namespace('helm-removal')
  end)
  teardown(function() cluster.cleanup('configmaps', 'secrets') end)

  it('refuses a hand-over with keep while release A is still stored, naming both ways out, and writes nothing', function()
    h.must(helm_cli('install ingress ' .. h.q(chart({ 'handed', 'also-a' }))))
    local before = kget('handed').metadata.resourceVersion
    local ok, err = pcall(helm.handover, 'configmaps', 'handed', { namespace = NS, from = 'ingress', to = 'ingress-nginx', keep = true })
    assert.is_false(ok)
    assert.are.equal('ReleaseStillStored', err.reason)
    h.contains(err.message, "release 'ingress' (namespace " .. NS .. ') is still stored (1 revision)')
    h.contains(err.message, "opts.from_release = 'purge'")
    h.contains(err.message, "opts.from_release = 'stays'")
    assert.are.equal(before, kget('handed').metadata.resourceVersion)
    -- what it guards against: the live keep alone, and A removed
    helm.handover('configmaps', 'handed', { namespace = NS, from = 'ingress', to = 'ingress-nginx', keep = true,
      from_release = 'stays' })
    assert.are.equal('keep', kget('handed').metadata.annotations['helm.sh/resource-policy'])
    h.must(helm_cli('uninstall ingress --wait'))
    assert.is_false(exists('handed'), 'helm uninstall kept an object its stored manifest did not mark keep')
  end)

  it("with from_release = 'purge', ends release A after the hand-over: removing it then deletes none of the handed objects", function()
    h.must(helm_cli('install dashboard ' .. h.q(chart({ 'dash-cm', 'dash-svc' }))))
    for _, n in ipairs({ 'dash-cm', 'dash-svc' }) do
      local _, changed = helm.handover('configmaps', n, { namespace = NS, from = 'dashboard', to = 'dashboard-v2', keep = true,
        from_release = 'purge' })
      assert.is_true(changed)
    end
    assert.are.same({ 'dashboard-v2', NS }, { helm.owner(kget('dash-cm')) })
    -- A's storage is gone, so its removal finds nothing to delete
    local un = helm_cli('uninstall dashboard')
    assert.are_not.equal(0, un.code)
    h.contains(un.err, 'not found')
    assert.is_true(exists('dash-cm'))
    assert.is_true(exists('dash-svc'))
    -- release B takes them: helm install adopts what carries its ownership
    h.must(helm_cli('install dashboard-v2 ' .. h.q(chart({ 'dash-cm', 'dash-svc' }))))
    assert.are.same({ 'dashboard-v2', NS }, { helm.owner(kget('dash-cm')) })
  end)

  it("with from_release = 'stays', release A drops the object in its next upgrade, which honours the live keep, and its removal then leaves it", function()
    h.must(helm_cli('install monitoring ' .. h.q(chart({ 'grafana-cm', 'stays-with-a' }))))
    helm.handover('configmaps', 'grafana-cm', { namespace = NS, from = 'monitoring', to = 'grafana', keep = true,
      from_release = 'stays' })
    h.must(helm_cli('upgrade monitoring ' .. h.q(chart({ 'stays-with-a' }))))
    assert.is_true(exists('grafana-cm'), 'the upgrade that dropped it deleted it')
    h.must(helm_cli('uninstall monitoring --wait'))
    assert.is_true(exists('grafana-cm'))
    assert.is_false(exists('stays-with-a'), 'what A kept for itself goes with A')
  end)
end)

describe('#e2e helm.purge_release', function()
  local function storage(name, release, extra_labels)
    local labels = { owner = 'helm', name = release, status = 'superseded' }
    for k, v in pairs(extra_labels or {}) do labels[k] = v end
    cluster.apply({ apiVersion = 'v1', kind = 'Secret', type = 'helm.sh/release.v1',
      metadata = { name = name, namespace = NS, labels = labels }, data = { release = 'eA==' } })
  end

  local function secrets()
    local names = {}
    for _, s in ipairs(cluster.list('secrets', NS)) do names[#names + 1] = s.metadata.name end
    table.sort(names)
    return names
  end

  setup(function() NS = cluster.namespace('helm-purge') end)
  teardown(function() cluster.cleanup('secrets') end)

  it("deletes every revision of that release's storage and nothing else", function()
    storage('sh.helm.release.v1.gone.v1', 'gone')
    storage('sh.helm.release.v1.gone.v2', 'gone')
    storage('sh.helm.release.v1.stays.v1', 'stays')
    cluster.apply({ apiVersion = 'v1', kind = 'Secret',
      metadata = { name = 'not-helm', namespace = NS, labels = { name = 'gone' } } })
    assert.are.equal(2, helm.purge_release('gone', NS))
    assert.are.same({ 'not-helm', 'sh.helm.release.v1.stays.v1' }, secrets())
  end)

  it('is a no-op, one list and no write, for a release without storage', function()
    local before = secrets()
    local deleted
    assert.are.equal(1, requests(function() deleted = helm.purge_release('never-installed', NS) end))
    assert.are.equal(0, deleted)
    assert.are.same(before, secrets())
  end)
end)

describe('#e2e stdlib modules in the migration sandbox', function()
  it('load and run where migrations run', function()
    local res = h.lua([[
      local helm, fleet, flux = require('helm'), require('fleet'), require('flux')
      local r, n = helm.owner({ metadata = { annotations = {
        ['meta.helm.sh/release-name'] = 'r', ['meta.helm.sh/release-namespace'] = 'n' } } })
      print(require('json').encode({ r, n, type(fleet.each), flux.RESOURCE }))
    ]])
    h.must(res)
    assert.are.same({ 'r', 'n', 'function', 'helmreleases.helm.toolkit.fluxcd.io' }, json.decode(res.out))
  end)
end)
