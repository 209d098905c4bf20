-- migrations/pre-apply/seaweedfs-db-handover.lua, run as the runner runs it,
-- on CNPG Clusters of a minimal CRD: one case for each branch the original
-- (cozystack/cozystack migration 43 and lib/seaweedfs-db-adopt.sh at
-- 3c780acd417f086f8f18d040d0d7020ff55d3ba3) names in its comments. Each
-- case puts the filer's Cluster (always named seaweedfs-db) in a namespace
-- of its own, as a tenant has one.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')
local proxy = require('support.proxy')

local SLUG = 'seaweedfs-db-handover'
local RES = 'clusters.postgresql.cnpg.io'
local NAME = 'seaweedfs-db'
local RELEASE, RELEASE_NS, POLICY = 'meta.helm.sh/release-name', 'meta.helm.sh/release-namespace',
  'helm.sh/resource-policy'

-- place(prefix, annotations [, o]) -> ns: a namespace holding Cluster
-- seaweedfs-db (or o.name) with these annotations and o.labels.
local function place(prefix, annotations, o)
  o = o or {}
  local ns = cluster.namespace(prefix)
  local meta = { name = o.name or NAME }
  if next(annotations) then meta.annotations = annotations end
  if o.labels then meta.labels = o.labels end
  cluster.apply({ apiVersion = 'postgresql.cnpg.io/v1', kind = 'Cluster', metadata = meta,
    spec = { instances = 2 } }, ns)
  return ns
end

local function get(ns, name) return cluster.get(RES, name or NAME, ns) end
local function ann(o) return o.metadata.annotations or {} end
local function rv(ns, name) return get(ns, name).metadata.resourceVersion end

describe('#e2e migration ' .. SLUG, function()
  migration.common(SLUG, { resource = RES, crd = 'clusters-cnpg', what = 'CNPG', purge = { RES }, on_error = 'abort' })

  describe('with CNPG served', function()
    setup(function() cluster.crds('clusters-cnpg') end)

    it('hands a Cluster owned by <instance>-system to <instance>-db with keep, whatever the instance is called', function()
      local a = place('swfs-foo', { [RELEASE] = 'foo-system', [RELEASE_NS] = 'elsewhere' })
      local b = place('swfs-default', { [RELEASE] = 'seaweedfs-system' },
        { labels = { ['app.kubernetes.io/managed-by'] = 'Helm' } })
      local res = migration.assert_ok(migration.run(SLUG))
      local o = get(a)
      assert.are.equal('foo-db', ann(o)[RELEASE])
      assert.are.equal('keep', ann(o)[POLICY])
      -- only release-name and keep: the release namespace and the labels stay as they were
      assert.are.equal('elsewhere', ann(o)[RELEASE_NS])
      assert.is_nil((o.metadata.labels or {})['app.kubernetes.io/managed-by'])
      assert.are.equal(2, o.spec.instances)
      o = get(b)
      assert.are.same({ 'seaweedfs-db', 'keep', 'Helm' }, { ann(o)[RELEASE], ann(o)[POLICY], o.metadata.labels['app.kubernetes.io/managed-by'] })
      assert.is_nil(ann(o)[RELEASE_NS])
      h.contains(res.output, 'Cluster/seaweedfs-db in ' .. a .. ': handed over from foo-system to foo-db, kept')
    end)

    it('hands over a -system owned Cluster that is already kept (migration 53: clusters that ran the hardcoded 43)', function()
      local ns = place('swfs-kept', { [RELEASE] = 'bar-system', [POLICY] = 'keep' })
      migration.assert_ok(migration.run(SLUG))
      assert.are.same({ 'bar-db', 'keep' }, { ann(get(ns))[RELEASE], ann(get(ns))[POLICY] })
    end)

    it('adds keep to a Cluster owned by <instance>-db without it, the case the original calls data loss', function()
      local a = place('swfs-db-nokeep', { [RELEASE] = 'foo-db', [RELEASE_NS] = 'tenant-x' })
      local b = place('swfs-db-delete', { [RELEASE] = 'tenant-fresh-db', [POLICY] = 'delete' })
      local res = migration.assert_ok(migration.run(SLUG))
      assert.are.same({ 'foo-db', 'tenant-x', 'keep' }, { ann(get(a))[RELEASE], ann(get(a))[RELEASE_NS], ann(get(a))[POLICY] })
      assert.are.same({ 'tenant-fresh-db', 'keep' }, { ann(get(b))[RELEASE], ann(get(b))[POLICY] })
      h.contains(res.output, 'Cluster/seaweedfs-db in ' .. a .. ': owned by foo-db, now kept')
    end)

    local alone = {
      { 'owned by <instance>-db and kept already', { [RELEASE] = 'foo-db', [POLICY] = 'keep' },
        'is already handed over to foo-db and kept: nothing to do' },
      { 'without a release-name', {}, 'carries no meta.helm.sh/release-name: not Helm-managed, left alone' },
      { 'with an empty release-name', { [RELEASE] = '' }, 'carries no meta.helm.sh/release-name' },
      { 'owned by a release named just "-system"', { [RELEASE] = '-system' },
        "owned by a release named '-system', with no instance name: left alone" },
      { 'owned by an unrelated release', { [RELEASE] = 'postgres-apps', [POLICY] = 'keep' },
        "owned by the unrelated release 'postgres-apps': left alone" },
    }
    for _, case in ipairs(alone) do
      it('leaves a Cluster ' .. case[1] .. ' as it is, and says so', function()
        local ns = place('swfs-alone', case[2])
        local before = rv(ns)
        local res = migration.assert_ok(migration.run(SLUG))
        assert.are.equal(before, rv(ns))
        h.contains(res.output, case[3])
      end)
    end

    it('touches no Cluster of another name, whoever owns it', function()
      local ns = cluster.namespace('swfs-other')
      cluster.apply('migrations/cnpg-clusters.yaml', ns)
      local before = rv(ns, 'files-db')
      migration.assert_ok(migration.run(SLUG))
      assert.are.equal(before, rv(ns, 'files-db'))
      assert.are.same({ 'files-system', nil }, { ann(get(ns, 'files-db'))[RELEASE], ann(get(ns, 'files-db'))[POLICY] })
      assert.are.equal('files-db', ann(get(ns))[RELEASE])
    end)

    it('changes nothing when it runs a second time', function()
      place('swfs-twice-a', { [RELEASE] = 'foo-system' })
      place('swfs-twice-b', { [RELEASE] = 'bar-db' })
      place('swfs-twice-c', { [RELEASE] = 'other' })
      migration.assert_idempotent(SLUG, { RES })
    end)

    it('fails naming a Cluster whose hand-over is refused, and still hands over the others', function()
      local frozen = place('swfs-refused', { [RELEASE] = 'foo-system' })
      local other = place('swfs-refused-other', { [RELEASE] = 'bar-system' })
      h.must(h.kc(string.format('label %s %s -n %s cozy-migrate.spec/frozen=%s', RES, NAME, frozen, frozen)))
      local res = migration.run_refused(SLUG, { group = 'postgresql.cnpg.io', resource = 'clusters',
        selector = { ['cozy-migrate.spec/frozen'] = frozen }, message = 'frozen by the spec',
        probe = { name = NAME, namespace = frozen } })
      migration.assert_fleet_failed(res, frozen, { NAME }, 'frozen by the spec')
      assert.are.equal('foo-system', ann(get(frozen))[RELEASE])
      assert.are.same({ 'bar-db', 'keep' }, { ann(get(other))[RELEASE], ann(get(other))[POLICY] })
    end)

    describe('with an identity of its own', function()
      local made = {}
      teardown(function()
        for _, name in ipairs(made) do h.kc('delete clusterrolebinding,clusterrole ' .. name .. ' --ignore-not-found') end
      end)
      -- A kubeconfig whose identity may only do `verbs` on Clusters (and discovery).
      local function identity(verbs)
        local ns = cluster.namespace('swfs-sa')
        local name = cluster.unique('cozy-spec-swfs')
        made[#made + 1] = name
        h.must(h.kc('create serviceaccount runner -n ' .. ns))
        h.must(h.kc(string.format('create clusterrole %s --verb=%s --resource=%s', name, verbs, RES)))
        h.must(h.kc(string.format('create clusterrolebinding %s --clusterrole=%s --serviceaccount=%s:runner',
          name, name, ns)))
        local token = h.must(h.kc('create token runner -n ' .. ns)).out:gsub('%s+$', '')
        return cluster.kubeconfig { token = token }
      end

      it('fails when the Clusters cannot be listed, instead of handing over none', function()
        place('swfs-nolist', { [RELEASE] = 'foo-system' })
        local res = migration.run(SLUG, { kubeconfig = identity('get') })
        migration.assert_failed(res, 'forbidden')
      end)

      it('fails when a Cluster cannot be read, leaving it as it is', function()
        local ns = place('swfs-noget', { [RELEASE] = 'foo-system' })
        local res = migration.run(SLUG, { kubeconfig = identity('list') })
        migration.assert_failed(res, 'forbidden')
        assert.are.equal('foo-system', ann(get(ns))[RELEASE])
      end)
    end)

    describe('when a Cluster disappears between the scan and the read', function()
      local p
      setup(function()
        p = proxy.start('')
      end)
      teardown(function() proxy.stop(p) end)

      it('skips it and hands over the others', function()
        local gone = place('swfs-gone', { [RELEASE] = 'foo-system' })
        local other = place('swfs-gone-other', { [RELEASE] = 'bar-system' })
        -- the read of that one Cluster answers NotFound, as once it is deleted
        proxy.faults(p, { string.format('method=GET,path=/apis/postgresql.cnpg.io/v1/namespaces/%s/clusters/%s,action=status,code=404',
          gone, NAME) })
        local res = migration.assert_ok(migration.run(SLUG, { kubeconfig = p.kubeconfig }))
        h.contains(res.output, 'Cluster/seaweedfs-db in ' .. gone .. ' disappeared between the scan and the read: skipped')
        assert.are.equal('foo-system', ann(get(gone))[RELEASE])
        assert.are.equal('bar-db', ann(get(other))[RELEASE])
      end)
    end)
  end)
end)
