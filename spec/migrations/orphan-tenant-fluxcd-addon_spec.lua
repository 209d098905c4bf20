-- migrations/pre-apply/orphan-tenant-fluxcd-addon.lua, run as the runner
-- runs it. No helm-controller runs here, so a HelmRelease that still had its
-- finalizer would stay forever once deleted: a release that disappears was
-- really orphaned (its finalizer removed), not waiting to be uninstalled.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')

local SLUG = 'orphan-tenant-fluxcd-addon'
local RES = 'helmreleases.helm.toolkit.fluxcd.io'
local FLUXCD = 'kubernetes-t1-fluxcd'
local OPERATOR = 'kubernetes-t1-fluxcd-operator'
local LOOKALIKES = { 'kubernetes-t1-cilium', 'kubernetes-t1-fluxcd-extra', 'kubernetes-t1-legacy-chart' }

local function hr(ns, name) return cluster.get(RES, name, ns) end

local function label(ns, names, key)
  h.must(h.kc(string.format('label %s %s -n %s %s=%s', RES, table.concat(names, ' '), ns, key, ns)))
end

describe('#e2e migration ' .. SLUG, function()
  migration.common(SLUG, { resource = RES, crd = 'helmreleases', what = 'Flux HelmReleases', purge = { RES }, on_error = 'abort' })

  describe('with HelmReleases served', function()
    setup(function() cluster.crds('helmreleases') end)

    it('orphans both Flux addon releases and leaves every other release as it was', function()
      local ns = cluster.namespace('fluxcd')
      cluster.apply('migrations/tenant-fluxcd-helmreleases.yaml', ns)
      local before = {}
      for _, name in ipairs(LOOKALIKES) do before[name] = hr(ns, name).metadata.resourceVersion end
      local res = migration.assert_ok(migration.run(SLUG))
      assert.is_nil(hr(ns, FLUXCD))
      assert.is_nil(hr(ns, OPERATOR))
      assert.matches('orphaned HelmRelease ' .. ns .. '/' .. FLUXCD, res.output, 1, true)
      for _, name in ipairs(LOOKALIKES) do
        local o = hr(ns, name)
        assert.are.equal(before[name], o.metadata.resourceVersion, name)
        assert.are.same({ 'finalizers.fluxcd.io' }, o.metadata.finalizers)
      end
    end)

    it('changes nothing when there is no Flux addon release', function()
      local ns = cluster.namespace('fluxcd-none')
      cluster.apply('migrations/tenant-other-helmreleases.yaml', ns)
      local before = migration.snapshot({ RES })
      assert.are.equal(2, #cluster.list(RES, ns))
      migration.assert_ok(migration.run(SLUG))
      assert.are.same({}, migration.diff(before, migration.snapshot({ RES })))
    end)

    it('changes nothing when it runs a second time', function()
      local ns = cluster.namespace('fluxcd-twice')
      cluster.apply('migrations/tenant-fluxcd-helmreleases.yaml', ns)
      migration.assert_idempotent(SLUG, { RES })
    end)

    it('fails naming a release it may not delete, orphans the other, and finishes on the next run', function()
      local ns = cluster.namespace('fluxcd-nodelete')
      cluster.apply('migrations/tenant-fluxcd-helmreleases.yaml', ns)
      label(ns, { OPERATOR }, 'cozy-migrate.spec/undeletable')
      local res = migration.run_refused(SLUG, { group = 'helm.toolkit.fluxcd.io', resource = 'helmreleases',
        operations = { 'DELETE' },
        selector = { ['cozy-migrate.spec/undeletable'] = ns }, message = 'deletion refused by the spec',
        probe = { name = OPERATOR, namespace = ns } })
      migration.assert_fleet_failed(res, ns, { OPERATOR }, 'deletion refused by the spec')
      assert.is_nil(hr(ns, FLUXCD))
      -- left safe: suspended and without finalizers, so no uninstall can follow
      local o = hr(ns, OPERATOR)
      assert.is_true(o.spec.suspend)
      assert.is_nil(o.metadata.finalizers)
      migration.assert_ok(migration.run(SLUG))
      assert.is_nil(hr(ns, OPERATOR))
    end)

    it('fails without deleting a release whose finalizers it may not remove', function()
      local ns = cluster.namespace('fluxcd-frozen')
      cluster.apply('migrations/tenant-fluxcd-helmreleases.yaml', ns)
      label(ns, { FLUXCD }, 'cozy-migrate.spec/frozen')
      local res = migration.run_refused(SLUG, { group = 'helm.toolkit.fluxcd.io', resource = 'helmreleases',
        selector = { ['cozy-migrate.spec/frozen'] = ns }, message = 'frozen by the spec',
        probe = { name = FLUXCD, namespace = ns } })
      migration.assert_fleet_failed(res, ns, { FLUXCD }, 'frozen by the spec')
      local o = hr(ns, FLUXCD)
      assert.is_nil(o.metadata.deletionTimestamp)
      assert.are.same({ 'finalizers.fluxcd.io' }, o.metadata.finalizers)
      assert.is_nil(hr(ns, OPERATOR))
    end)
  end)
end)
