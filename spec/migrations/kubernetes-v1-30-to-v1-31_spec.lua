-- migrations/pre-apply/kubernetes-v1-30-to-v1-31.lua, run as the runner runs
-- it, on tenant Kubernetes objects of a minimal CRD.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')

local SLUG = 'kubernetes-v1-30-to-v1-31'
local RES = 'kuberneteses.apps.cozystack.io'
local OTHERS = { current = 'v1.31', older = 'v1.29' }

local function k(ns, name) return cluster.get(RES, name, ns) end

local function version(ns, name) return k(ns, name).spec.version end

describe('#e2e migration ' .. SLUG, function()
  migration.common(SLUG, { resource = RES, crd = 'kuberneteses', what = 'tenant Kubernetes', purge = { RES }, on_error = 'abort' })

  describe('with tenant Kubernetes served', function()
    setup(function() cluster.crds('kuberneteses') end)

    it('moves every v1.30 cluster to v1.31 and no other', function()
      local ns = cluster.namespace('k8s')
      cluster.apply('migrations/kuberneteses.yaml', ns)
      local before = {}
      for _, name in ipairs({ 'current', 'older', 'unversioned' }) do
        before[name] = k(ns, name).metadata.resourceVersion
      end
      migration.assert_ok(migration.run(SLUG))
      for _, name in ipairs({ 'alpha', 'beta', 'gamma' }) do assert.are.equal('v1.31', version(ns, name), name) end
      local alpha = k(ns, 'alpha').spec
      assert.are.same({ replicas = 2 }, alpha.controlPlane)
      assert.are.same({ md0 = { minReplicas = 1, maxReplicas = 3 } }, alpha.nodeGroups)
      for name, v in pairs(OTHERS) do assert.are.equal(v, version(ns, name), name) end
      for name, rv in pairs(before) do
        assert.are.equal(rv, k(ns, name).metadata.resourceVersion, name .. ' was changed')
      end
    end)

    it('changes nothing when no cluster is on v1.30', function()
      local ns = cluster.namespace('k8s-none')
      cluster.apply({
        { apiVersion = 'apps.cozystack.io/v1alpha1', kind = 'Kubernetes', metadata = { name = 'current' },
          spec = { version = 'v1.31' } },
        { apiVersion = 'apps.cozystack.io/v1alpha1', kind = 'Kubernetes', metadata = { name = 'older' },
          spec = { version = 'v1.29' } },
      }, ns)
      local before = migration.snapshot({ RES })
      assert.are.equal(2, #cluster.list(RES, ns))
      migration.assert_ok(migration.run(SLUG))
      assert.are.same({}, migration.diff(before, migration.snapshot({ RES })))
    end)

    it('changes nothing when it runs a second time', function()
      local ns = cluster.namespace('k8s-twice')
      cluster.apply('migrations/kuberneteses.yaml', ns)
      migration.assert_idempotent(SLUG, { RES })
    end)

    it('upgrades every cluster it may, then fails listing each one it may not', function()
      local ns = cluster.namespace('k8s-pinned')
      cluster.apply('migrations/kuberneteses.yaml', ns)
      h.must(h.kc(string.format('label %s alpha gamma -n %s cozy-migrate.spec/pinned=%s', RES, ns, ns)))
      local res = migration.run_refused(SLUG, { group = 'apps.cozystack.io', resource = 'kuberneteses',
        selector = { ['cozy-migrate.spec/pinned'] = ns }, message = 'version pinned by the spec',
        probe = { name = 'alpha', namespace = ns } })
      migration.assert_fleet_failed(res, ns, { 'alpha', 'gamma' }, 'version pinned by the spec')
      assert.are.equal('v1.30', version(ns, 'alpha'))
      assert.are.equal('v1.31', version(ns, 'beta'))
      assert.are.equal('v1.30', version(ns, 'gamma'))
      -- once nothing refuses, a run finishes the job
      migration.assert_ok(migration.run(SLUG))
      assert.are.equal('v1.31', version(ns, 'alpha'))
      assert.are.equal('v1.31', version(ns, 'gamma'))
    end)
  end)
end)
