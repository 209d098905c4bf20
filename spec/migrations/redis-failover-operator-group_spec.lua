-- migrations/pre-apply/redis-failover-operator-group.lua, run as the runner
-- runs it (cozy-migrate exec) against the cluster in KUBECONFIG. Each case
-- has a namespace of its own; the migration walks every namespace, so the
-- objects of a case are removed after it.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')

local SLUG = 'redis-failover-operator-group'
local RES = 'redisfailovers.databases.spotahome.com'
local LABEL = 'redis-failover.freshworks.com/operator-group'
local PINNED = 'redis:6.2.6-alpine'

local function rf(ns, name) return cluster.get(RES, name, ns) end

describe('#e2e migration ' .. SLUG, function()
  migration.common(SLUG, { resource = RES, crd = 'redisfailovers', what = 'RedisFailovers', purge = { RES }, on_error = 'abort' })

  describe('with RedisFailovers served', function()
    setup(function() cluster.crds('redisfailovers') end)

    it('labels every RedisFailover and pins only the images that are empty', function()
      local ns = cluster.namespace('redis')
      cluster.apply('migrations/redis-failovers.yaml', ns)
      local done_rv = rf(ns, 'done').metadata.resourceVersion
      migration.assert_ok(migration.run(SLUG))

      local o = rf(ns, 'no-images')
      assert.are.equal('cozystack', o.metadata.labels[LABEL])
      assert.are.same({ replicas = 3, image = PINNED }, o.spec.redis)
      assert.are.same({ replicas = 3, image = PINNED }, o.spec.sentinel)

      o = rf(ns, 'preset-redis')
      assert.are.equal('cozystack', o.metadata.labels[LABEL])
      assert.are.equal('redis:7.2.4', o.spec.redis.image)
      assert.are.equal(PINNED, o.spec.sentinel.image)

      o = rf(ns, 'no-spec')
      assert.are.equal('cozystack', o.metadata.labels[LABEL])
      assert.are.same({ redis = { image = PINNED }, sentinel = { image = PINNED } }, o.spec)

      assert.are.equal('cozystack', rf(ns, 'other-group').metadata.labels[LABEL])

      o = rf(ns, 'done')
      assert.are.equal(done_rv, o.metadata.resourceVersion)
      assert.are.equal('quay.io/custom/sentinel:1', o.spec.sentinel.image)
    end)

    it('changes nothing when every RedisFailover is already so', function()
      local ns = cluster.namespace('redis-done')
      cluster.apply('migrations/redis-failovers-done.yaml', ns)
      local before = migration.snapshot({ { RES, namespaces = { ns } } })
      assert.are.equal(2, #cluster.list(RES, ns))
      migration.assert_ok(migration.run(SLUG))
      assert.are.same({}, migration.diff(before, migration.snapshot({ { RES, namespaces = { ns } } })))
    end)

    it('changes nothing when it runs a second time', function()
      local ns = cluster.namespace('redis-twice')
      cluster.apply('migrations/redis-failovers.yaml', ns)
      migration.assert_idempotent(SLUG, { RES })
    end)

    it('fails, changing nothing, when the apiserver rejects its probe', function()
      local ns = cluster.namespace('redis-unauth')
      cluster.apply('migrations/redis-failovers.yaml', ns)
      local before = migration.snapshot({ RES })
      local res = migration.run(SLUG, { kubeconfig = cluster.kubeconfig { token = 'not-a-valid-token' } })
      migration.assert_failed(res, 'Unauthorized')
      assert.are.same({}, migration.diff(before, migration.snapshot({ RES })))
    end)

    it('fails naming each RedisFailover whose patch is refused, and migrates the others', function()
      local ns = cluster.namespace('redis-refused')
      cluster.apply('migrations/redis-failovers.yaml', ns)
      h.must(h.kc(string.format('label %s no-images preset-redis -n %s cozy-migrate.spec/frozen=%s', RES, ns, ns)))
      local res = migration.run_refused(SLUG, { group = 'databases.spotahome.com', resource = 'redisfailovers',
        selector = { ['cozy-migrate.spec/frozen'] = ns }, message = 'frozen by the spec',
        probe = { name = 'no-images', namespace = ns } })
      migration.assert_fleet_failed(res, ns, { 'no-images', 'preset-redis' }, 'frozen by the spec')
      assert.is_nil(rf(ns, 'no-images').spec.redis.image)
      assert.are.equal('cozystack', rf(ns, 'no-spec').metadata.labels[LABEL])
    end)
  end)
end)
