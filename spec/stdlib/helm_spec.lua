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
