-- stdlib/flux.lua against the real apiserver, on HelmReleases of a minimal
-- CRD with the status subresource Flux's has. No helm-controller runs here:
-- a finalizer stays until someone removes it, exactly the case orphan()
-- exists for.
local h = require('support.helpers')
local cluster = require('support.cluster')
local kube = require('kube')
local core = require('kube.core')
local flux = require('flux')

local NS
local FINALIZER = 'finalizers.fluxcd.io'

local function hr(name, extra)
  local obj = {
    apiVersion = 'helm.toolkit.fluxcd.io/v2', kind = 'HelmRelease',
    metadata = { name = name, namespace = NS, finalizers = { FINALIZER } },
    spec = { interval = '5m', chart = { spec = { chart = name } } },
  }
  for k, v in pairs(extra or {}) do obj.metadata[k] = v or nil end
  cluster.apply(obj)
end

local function kget(name) return cluster.get('helmreleases.helm.toolkit.fluxcd.io', name, NS) end

local function requests(fn)
  kube.resource(flux.RESOURCE)
  local before = core.requests()
  fn()
  return core.requests() - before
end

describe('#e2e flux', function()
  setup(function()
    assert.is_true(h.has_cluster(), 'KUBECONFIG must point at a cluster (tools/run-tests sets it)')
    cluster.crds('helmreleases')
    NS = cluster.namespace('flux')
  end)
  teardown(function() cluster.cleanup('helmreleases.helm.toolkit.fluxcd.io') end)

  describe('suspend and resume', function()
    it('set spec.suspend, and only read when it already has the value', function()
      hr('sr')
      local _, changed = flux.suspend('sr', NS)
      assert.is_true(changed)
      assert.is_true(kget('sr').spec.suspend)
      local rv = kget('sr').metadata.resourceVersion
      assert.are.equal(1, requests(function() _, changed = flux.suspend('sr', NS) end))
      assert.is_false(changed)
      assert.are.equal(rv, kget('sr').metadata.resourceVersion)
      _, changed = flux.resume('sr', NS)
      assert.is_true(changed)
      assert.is_false(kget('sr').spec.suspend)
      assert.are.equal(1, requests(function() _, changed = flux.resume('sr', NS) end))
      assert.is_false(changed)
    end)

    it('raise a NotFound error value for a release that does not exist', function()
      local ok, err = pcall(flux.suspend, 'absent', NS)
      assert.is_false(ok)
      assert.is_true(kube.is_not_found(err))
      assert.matches(NS .. '/absent', err.message, 1, true)
    end)
  end)

  describe('reconcile', function()
    it('writes a fresh reconcile.fluxcd.io/requestedAt each time it is asked', function()
      hr('rc')
      local a = flux.reconcile('rc', NS)
      assert.are.equal(a, kget('rc').metadata.annotations['reconcile.fluxcd.io/requestedAt'])
      assert.matches('^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d+Z$', a)
      local b = flux.reconcile('rc', NS)
      assert.are_not.equal(a, b)
      assert.are.equal(b, kget('rc').metadata.annotations['reconcile.fluxcd.io/requestedAt'])
    end)
  end)

  describe('orphan', function()
    it('suspends the release, removes its finalizers and deletes it', function()
      hr('orph')
      assert.is_true(flux.orphan('orph', NS))
      -- Gone at once: nothing was left to finalize it, so nothing uninstalled.
      assert.is_nil(kget('orph'))
    end)

    it('returns false for a release that is already gone', function()
      assert.are.equal(1, requests(function() assert.is_false(flux.orphan('never-there', NS)) end))
    end)

    it('deletes a release that has no finalizers without patching them', function()
      hr('bare', { finalizers = false })
      -- the read, the suspend, the delete
      assert.are.equal(3, requests(function() assert.is_true(flux.orphan('bare', NS)) end))
      assert.is_nil(kget('bare'))
    end)

    it('does not delete a release whose finalizers could not be removed', function()
      hr('held', { labels = { ['cozy-migrate.spec/frozen'] = NS } })
      local p = cluster.deny { group = 'helm.toolkit.fluxcd.io', resource = 'helmreleases',
        selector = { ['cozy-migrate.spec/frozen'] = NS }, message = 'releases are frozen',
        probe = { name = 'held', namespace = NS } }
      local ok, err = pcall(flux.orphan, 'held', NS)
      cluster.allow(p)
      assert.is_false(ok)
      assert.is_true(kube.is_forbidden(err), tostring(err))
      local got = kget('held')
      assert.is_nil(got.metadata.deletionTimestamp)
      assert.are.same({ FINALIZER }, got.metadata.finalizers)
    end)

    it('leaves the release suspended and without finalizers when the delete is refused', function()
      hr('undeletable', { labels = { ['cozy-migrate.spec/undeletable'] = NS } })
      local p = cluster.deny { group = 'helm.toolkit.fluxcd.io', resource = 'helmreleases',
        operations = { 'DELETE' }, selector = { ['cozy-migrate.spec/undeletable'] = NS },
        message = 'deletion refused', probe = { name = 'undeletable', namespace = NS } }
      local ok, err = pcall(flux.orphan, 'undeletable', NS)
      cluster.allow(p)
      assert.is_false(ok)
      assert.matches('deletion refused', tostring(err), 1, true)
      local got = kget('undeletable')
      assert.is_true(got.spec.suspend)
      assert.is_nil(got.metadata.finalizers)
      -- and the next attempt finishes the job
      assert.is_true(flux.orphan('undeletable', NS))
      assert.is_nil(kget('undeletable'))
    end)
  end)
end)
