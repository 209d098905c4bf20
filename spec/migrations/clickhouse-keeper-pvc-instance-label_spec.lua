-- migrations/background/clickhouse-keeper-pvc-instance-label.lua, run as
-- the runner runs it, on Keeper installations of a minimal CRD and real
-- PVCs (nothing binds them here; they stay Pending, which is all a label
-- needs).
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')

local SLUG = 'clickhouse-keeper-pvc-instance-label'
local RES = 'clickhousekeeperinstallations.clickhouse-keeper.altinity.com'
local LABEL = 'app.kubernetes.io/instance'

local function instance(ns, pvc)
  return (cluster.get('persistentvolumeclaims', pvc, ns).metadata.labels or {})[LABEL]
end

local function pvc(name, labels)
  return { apiVersion = 'v1', kind = 'PersistentVolumeClaim', metadata = { name = name, labels = labels },
    spec = { accessModes = { 'ReadWriteOnce' }, resources = { requests = { storage = '1Gi' } } } }
end

describe('#e2e migration ' .. SLUG, function()
  migration.common(SLUG, { resource = RES, crd = 'clickhousekeeperinstallations', what = 'ClickHouse Keeper', purge = { RES, 'persistentvolumeclaims' }, on_error = 'warn' })

  describe('with ClickHouse Keeper served', function()
    setup(function() cluster.crds('clickhousekeeperinstallations') end)

    it("labels each Keeper PVC with its installation's release, and no other PVC", function()
      local ns, elsewhere = cluster.namespace('chk'), cluster.namespace('chk-elsewhere')
      cluster.apply('migrations/clickhouse-keepers.yaml', ns)
      cluster.apply({ pvc('default-chk-analytics-keeper-cluster-0-0') }, elsewhere)
      local untouched = {}
      for _, name in ipairs({ 'default-chk-analytics-keeper-cluster-0-3', 'default-chk-standalone-cluster-0-0',
        'default-chk-ghost-keeper-cluster-0-0', 'data-analytics-0' }) do
        untouched[name] = cluster.get('persistentvolumeclaims', name, ns).metadata.resourceVersion
      end
      migration.assert_ok(migration.run(SLUG))
      for _, name in ipairs({ 'default-chk-analytics-keeper-cluster-0-0', 'default-chk-analytics-keeper-cluster-0-1',
        'default-chk-analytics-keeper-cluster-0-2', 'default-chk-analytics-keeper-cluster-0-3' }) do
        assert.are.equal('analytics', instance(ns, name), name)
      end
      assert.are.equal('analytics-keeper-eu', instance(ns, 'default-chk-analytics-keeper-eu-keeper-cluster-0-0'))
      for name, rv in pairs(untouched) do
        assert.are.equal(rv, cluster.get('persistentvolumeclaims', name, ns).metadata.resourceVersion, name)
      end
      assert.is_nil(instance(ns, 'default-chk-standalone-cluster-0-0'))
      assert.is_nil(instance(elsewhere, 'default-chk-analytics-keeper-cluster-0-0'))
    end)

    it('changes nothing when every Keeper PVC is labelled', function()
      local ns = cluster.namespace('chk-done')
      cluster.apply({
        { apiVersion = 'clickhouse-keeper.altinity.com/v1', kind = 'ClickHouseKeeperInstallation',
          metadata = { name = 'logs-keeper' } },
        pvc('default-chk-logs-keeper-cluster-0-0', { [LABEL] = 'logs' }),
        pvc('unrelated'),
      }, ns)
      local watched = { RES, 'persistentvolumeclaims' }
      local before = migration.snapshot(watched)
      migration.assert_ok(migration.run(SLUG))
      assert.are.same({}, migration.diff(before, migration.snapshot(watched)))
    end)

    it('changes nothing when it runs a second time', function()
      local ns = cluster.namespace('chk-twice')
      cluster.apply('migrations/clickhouse-keepers.yaml', ns)
      migration.assert_idempotent(SLUG, { RES, 'persistentvolumeclaims' })
    end)

    it('labels every PVC it may, then fails naming the installation and the PVC it may not', function()
      local ns = cluster.namespace('chk-refused')
      cluster.apply('migrations/clickhouse-keepers.yaml', ns)
      local refused = 'default-chk-analytics-keeper-cluster-0-0'
      h.must(h.kc(string.format('label pvc %s -n %s cozy-migrate.spec/frozen=%s', refused, ns, ns)))
      local res = migration.run_refused(SLUG, { resource = 'persistentvolumeclaims',
        selector = { ['cozy-migrate.spec/frozen'] = ns }, message = 'frozen by the spec',
        probe = { name = refused, namespace = ns } })
      migration.assert_fleet_failed(res, ns, { 'analytics-keeper' })
      assert.matches(ns .. '/' .. refused .. ': ', res.message, 1, true)
      assert.matches('frozen by the spec', res.message, 1, true)
      assert.is_nil(instance(ns, refused))
      assert.are.equal('analytics', instance(ns, 'default-chk-analytics-keeper-cluster-0-1'))
      assert.are.equal('analytics-keeper-eu', instance(ns, 'default-chk-analytics-keeper-eu-keeper-cluster-0-0'))
    end)
  end)
end)
