-- migrations/pre-apply/seaweedfs-db-handover.lua, run as the runner runs it,
-- on CNPG Clusters of a minimal CRD.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')
local helm = require('helm')

local SLUG = 'seaweedfs-db-handover'
local RES = 'clusters.postgresql.cnpg.io'
local UNTOUCHED = { 'cache-db', 'pg-db', 'unowned-db', 'seaweedfs-main' }

local function pg(ns, name) return cluster.get(RES, name, ns) end

local function annotations(o) return o.metadata.annotations or {} end

describe('#e2e migration ' .. SLUG, function()
  migration.common(SLUG, { resource = RES, crd = 'clusters-cnpg', what = 'CNPG', purge = { RES }, on_error = 'abort' })

  describe('with CNPG served', function()
    setup(function() cluster.crds('clusters-cnpg') end)

    it('hands each <instance>-db owned by a -system release to release <instance>-db, kept', function()
      local ns = cluster.namespace('swfs')
      cluster.apply('migrations/cnpg-clusters.yaml', ns)
      local before = {}
      for _, name in ipairs(UNTOUCHED) do before[name] = pg(ns, name).metadata.resourceVersion end
      migration.assert_ok(migration.run(SLUG))
      for _, name in ipairs({ 'seaweedfs-db', 'files-db' }) do
        local o = pg(ns, name)
        assert.are.same({ name, ns }, { helm.owner(o) })
        assert.are.equal('keep', annotations(o)['helm.sh/resource-policy'])
        assert.are.equal('Helm', o.metadata.labels['app.kubernetes.io/managed-by'])
      end
      assert.are.equal(2, pg(ns, 'seaweedfs-db').spec.instances)
      for _, name in ipairs(UNTOUCHED) do
        assert.are.equal(before[name], pg(ns, name).metadata.resourceVersion, name .. ' was changed')
      end
    end)

    it('adds keep (and the release namespace) to one already owned by its own release', function()
      local ns = cluster.namespace('swfs-keep')
      cluster.apply('migrations/cnpg-clusters.yaml', ns)
      migration.assert_ok(migration.run(SLUG))
      local o = pg(ns, 'archive-db')
      assert.are.same({ 'archive-db', ns }, { helm.owner(o) })
      assert.are.equal('keep', annotations(o)['helm.sh/resource-policy'])
    end)

    it('changes nothing when no Cluster is to be handed over', function()
      local ns = cluster.namespace('swfs-none')
      cluster.apply('migrations/cnpg-clusters-untouched.yaml', ns)
      local before = migration.snapshot({ RES })
      assert.are.equal(3, #cluster.list(RES, ns))
      migration.assert_ok(migration.run(SLUG))
      assert.are.same({}, migration.diff(before, migration.snapshot({ RES })))
    end)

    it('changes nothing when it runs a second time', function()
      local ns = cluster.namespace('swfs-twice')
      cluster.apply('migrations/cnpg-clusters.yaml', ns)
      migration.assert_idempotent(SLUG, { RES })
    end)

    it('fails naming a Cluster whose handover is refused, and hands over the others', function()
      local ns = cluster.namespace('swfs-refused')
      cluster.apply('migrations/cnpg-clusters.yaml', ns)
      h.must(h.kc(string.format('label %s seaweedfs-db -n %s cozy-migrate.spec/frozen=%s', RES, ns, ns)))
      local p = cluster.deny { group = 'postgresql.cnpg.io', resource = 'clusters',
        selector = { ['cozy-migrate.spec/frozen'] = ns }, message = 'frozen by the spec',
        probe = { name = 'seaweedfs-db', namespace = ns } }
      local res = migration.run(SLUG)
      cluster.allow(p)
      migration.assert_fleet_failed(res, ns, { 'seaweedfs-db' }, 'frozen by the spec')
      assert.are.equal('seaweedfs-system', helm.owner(pg(ns, 'seaweedfs-db')))
      assert.are.equal('files-db', helm.owner(pg(ns, 'files-db')))
    end)
  end)
end)
