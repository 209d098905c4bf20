-- migrations/pre-apply/tenant-kubernetes-pvc-cluster-label.lua (the port of
-- legacy migration 4), run as the runner runs it against a management
-- cluster (the testenv) and tenant clusters (support.tenant: tools/testenv
-- tenant), one of them down. The original's effect, on these fixtures:
-- every claim in a Kamaji tenant's namespace named as a PersistentVolume of
-- that tenant's cluster labelled cluster.x-k8s.io/cluster-name=<the
-- Secret's kamaji.clastix.io/name> (overwriting another value); nothing
-- else; a tenant that does not answer left as it is.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')
local tenant = require('support.tenant')

local SLUG = 'tenant-kubernetes-pvc-cluster-label'
local LABEL = 'cluster.x-k8s.io/cluster-name'

describe('#e2e migration ' .. SLUG, function()
  local foo, bar
  setup(function()
    h.need_cluster()
    foo, bar = tenant.volume_tenants() -- bar is down: its volume's claim must stay as it is
  end)
  teardown(function()
    cluster.purge('persistentvolumeclaims', 'secrets')
    cluster.cleanup()
  end)

  -- a case's Secrets go with it: the next case's run walks every
  -- namespace, and each tenant that is down costs its probe's time
  after_each(function() cluster.purge('secrets') end)

  local function need() return tenant.need(foo, pending) end

  -- A tenant's namespace: foo's and bar's Secrets, claims for each volume,
  -- one claim no tenant has a volume of, and a Secret of another project.
  local function platform(prefix)
    local ns = cluster.namespace(prefix)
    tenant.kamaji(foo, ns, 'kubernetes-foo')
    tenant.kamaji(bar, ns, 'kubernetes-bar')
    tenant.secret(foo, ns, 'other-admin-kubeconfig', { [tenant.LABEL] = tenant.LABEL_VALUE,
      ['kamaji.clastix.io/name'] = 'not-kamajis-project' })
    cluster.apply({ tenant.pvc('pvc-a'), tenant.pvc('pvc-b', { [LABEL] = 'old-name' }), tenant.pvc('pvc-c'),
      tenant.pvc('unrelated') }, ns)
    return ns
  end

  local function labels(ns)
    local out = {}
    for _, c in ipairs(cluster.list('persistentvolumeclaims', ns)) do
      out[c.metadata.name] = (c.metadata.labels or {})[LABEL] or false
    end
    return out
  end

  it('labels the claim of every volume a tenant cluster holds with its cluster, past a tenant that is down',
    function()
      if not need() then return end
      local ns = platform('tenant-root')
      local res = migration.assert_ok(migration.run(SLUG))
      assert.are.same({ ['pvc-a'] = 'kubernetes-foo', ['pvc-b'] = 'kubernetes-foo', ['pvc-c'] = false,
        unrelated = false }, labels(ns))
      assert.truthy(h.has(res.output, ns .. '/kubernetes-bar-admin-kubeconfig: skipped'), res.output)
      for _, e in ipairs(res.journal.entries) do
        assert.are.equal('persistentvolumeclaims', e.resource)
        assert.is_nil(e.cluster) -- every write is the management cluster's
      end
    end)

  it('changes nothing when it runs a second time', function()
    if not need() then return end
    platform('tenant-twice')
    migration.assert_idempotent(SLUG, { 'persistentvolumeclaims' })
  end)

  it('persists nothing on any cluster under --dry-run', function()
    if not need() then return end
    local ns = platform('tenant-dry')
    local before = migration.snapshot({ 'persistentvolumeclaims' })
    local pv = foo.kc_json('get pv pvc-a').metadata.resourceVersion
    local res = migration.assert_ok(migration.run(SLUG, { dry_run = true }))
    assert.is_true(res.journal.writes > 0)
    assert.are.same({}, migration.diff(before, migration.snapshot({ 'persistentvolumeclaims' })))
    assert.are.equal(false, labels(ns)['pvc-a'])
    assert.are.equal(pv, foo.kc_json('get pv pvc-a').metadata.resourceVersion)
  end)
end)
