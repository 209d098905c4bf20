-- migrations/pre-apply/tenant-kubernetes-volume-cluster-label.lua (the port
-- of legacy migration 5), run as the runner runs it against a management
-- cluster (the testenv) and tenant clusters (support.tenant: tools/testenv
-- tenant), one of them down. The original's effect, on these fixtures:
-- migration 4's labelling of the claims, and the same label on the
-- DataVolume (CDI) of each volume, where one of that name exists; a
-- tenant that does not answer left as it is; without CDI, the claims alone.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')
local tenant = require('support.tenant')

local SLUG = 'tenant-kubernetes-volume-cluster-label'
local LABEL = 'cluster.x-k8s.io/cluster-name'
local DV = 'datavolumes.cdi.kubevirt.io'

local function dv(name, labels)
  return { apiVersion = 'cdi.kubevirt.io/v1beta1', kind = 'DataVolume', metadata = { name = name, labels = labels },
    spec = { source = { blank = {} } } }
end

describe('#e2e migration ' .. SLUG, function()
  local foo, bar
  setup(function()
    h.need_cluster()
    foo, bar = tenant.volume_tenants() -- bar is down: its volume's claim must stay as it is
  end)
  teardown(function()
    cluster.purge('persistentvolumeclaims', 'secrets', DV)
    cluster.cleanup()
  end)

  -- a case's Secrets go with it: the next case's run walks every
  -- namespace, and each tenant that is down costs its probe's time
  after_each(function() cluster.purge('secrets') end)

  local function need() return tenant.need(foo, pending) end

  local function platform(prefix, with_dvs)
    local ns = cluster.namespace(prefix)
    tenant.kamaji(foo, ns, 'kubernetes-foo')
    tenant.kamaji(bar, ns, 'kubernetes-bar')
    cluster.apply({ tenant.pvc('pvc-a'), tenant.pvc('pvc-b', { [LABEL] = 'old-name' }), tenant.pvc('pvc-c'),
      tenant.pvc('unrelated') }, ns)
    if with_dvs then
      -- pvc-b has no DataVolume: a volume made without CDI
      cluster.apply({ dv('pvc-a'), dv('pvc-c'), dv('unrelated', { [LABEL] = 'kept' }) }, ns)
    end
    return ns
  end

  local function labels(resource, ns)
    local out = {}
    for _, c in ipairs(cluster.list(resource, ns)) do
      out[c.metadata.name] = (c.metadata.labels or {})[LABEL] or false
    end
    return out
  end

  it('labels the claims alone where CDI is not installed', function()
    if not need() then return end
    local absent, why = cluster.crd_absent('datavolumes')
    if not absent then pending(why) return end
    local ns = platform('tenant-nocdi')
    local res = migration.assert_ok(migration.run(SLUG))
    assert.are.same({ ['pvc-a'] = 'kubernetes-foo', ['pvc-b'] = 'kubernetes-foo', ['pvc-c'] = false,
      unrelated = false }, labels('persistentvolumeclaims', ns))
    assert.truthy(h.has(res.output, DV .. ' is not served'), res.output)
  end)

  describe('with DataVolumes served', function()
    setup(function() if foo then cluster.crds('datavolumes') end end)

    it('labels the claim and the DataVolume of every volume a tenant cluster holds, past a tenant that is down',
      function()
        if not need() then return end
        local ns = platform('tenant-root', true)
        local res = migration.assert_ok(migration.run(SLUG))
        assert.are.same({ ['pvc-a'] = 'kubernetes-foo', ['pvc-b'] = 'kubernetes-foo', ['pvc-c'] = false,
          unrelated = false }, labels('persistentvolumeclaims', ns))
        assert.are.same({ ['pvc-a'] = 'kubernetes-foo', ['pvc-c'] = false, unrelated = 'kept' }, labels(DV, ns))
        assert.truthy(h.has(res.output, ns .. '/kubernetes-bar-admin-kubeconfig: skipped'), res.output)
      end)

    it('changes nothing when it runs a second time', function()
      if not need() then return end
      platform('tenant-twice', true)
      migration.assert_idempotent(SLUG, { 'persistentvolumeclaims', DV })
    end)
  end)
end)
