-- Name resolution against the real apiserver's discovery: every name is
-- resolved by kubectl and by the kube module, and both must reach the same
-- object (same uid, apiVersion and kind). Includes a copy of Flux's
-- HelmRelease CRD (short name hr) and a CRD the script creates itself.
local h = require('support.helpers')
local json = require('json')

local NS = string.format('kd-%d-%d', os.time(), math.random(1000, 9999))
-- Unique per run: a CRD's kind and short name must not collide with one a
-- previous run left behind, or plain names would be ambiguous.
local SUFFIX = string.format('%d%d', os.time() % 100000, math.random(100, 999))
local GROUP = 'g' .. SUFFIX .. '.cozystack.io'
local KIND, PLURAL, SHORT = 'Gadget' .. SUFFIX, 'gadgets' .. SUFFIX, 'gdg' .. SUFFIX

local must = h.must

local function run(body, ...)
  return h.kube_script({ NS = NS, GROUP = GROUP, KIND = KIND, PLURAL = PLURAL, SHORT = SHORT }, body, ...)
end

local kapply = h.kapply

local HR_CRD = {
  apiVersion = 'apiextensions.k8s.io/v1', kind = 'CustomResourceDefinition',
  metadata = { name = 'helmreleases.helm.toolkit.fluxcd.io' },
  spec = {
    group = 'helm.toolkit.fluxcd.io', scope = 'Namespaced',
    names = { plural = 'helmreleases', singular = 'helmrelease', kind = 'HelmRelease',
      listKind = 'HelmReleaseList', shortNames = json.array { 'hr' } },
    versions = json.array {
      { name = 'v2', served = true, storage = true, subresources = { status = json.object() },
        schema = { openAPIV3Schema = { type = 'object', ['x-kubernetes-preserve-unknown-fields'] = true } } },
    },
  },
}

describe('#e2e kube name resolution', function()
  setup(function()
    h.need_cluster()
    must(h.kubectl('create namespace ' .. NS))
    h.apply_crd(HR_CRD)
    must(h.kubectl('create configmap named -n ' .. NS))
    must(h.kubectl('create deployment named --image=busybox:1.36 -n ' .. NS))
    kapply({ apiVersion = 'helm.toolkit.fluxcd.io/v2', kind = 'HelmRelease',
      metadata = { name = 'named', namespace = NS }, spec = { interval = '1m' } })
  end)

  teardown(function()
    h.kubectl('delete helmreleases,configmaps,deployments --all -n ' .. NS .. ' --wait=false')
    h.kubectl('delete crd ' .. PLURAL .. '.' .. GROUP .. ' --wait=false')
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  for _, name in ipairs({ 'cm', 'configmap', 'ConfigMap', 'configmaps', 'deploy', 'deployments.v1.apps',
    'Deployment', 'hr', 'helmreleases.helm.toolkit.fluxcd.io', 'HelmRelease' }) do
    it(string.format('resolves %q to what kubectl resolves it to', name), function()
      local k = json.decode(must(h.kubectl(string.format('get %s named -n %s -o json', name, NS))).out)
      local res = must(run(string.format([[
        local o = kube.get(%q, 'named', { namespace = NS })
        local r = kube.resource(%q)
        print(json.encode({ uid = o.metadata.uid, apiVersion = o.apiVersion, kind = o.kind,
          r_api = r.api_version, r_kind = r.kind, namespaced = r.namespaced }))
      ]], name, name)))
      assert.are.same({ uid = k.metadata.uid, apiVersion = k.apiVersion, kind = k.kind,
        r_api = k.apiVersion, r_kind = k.kind, namespaced = true }, res.json)
    end)
  end

  it('uses a CRD the script itself creates, right away, by kind, plural and short name', function()
    local res = run [[
      local crd_name = PLURAL .. '.' .. GROUP
      assert(not kube.has_resource(crd_name))
      kube.create('customresourcedefinitions', {
        apiVersion = 'apiextensions.k8s.io/v1', kind = 'CustomResourceDefinition',
        metadata = { name = crd_name },
        spec = {
          group = GROUP, scope = 'Namespaced',
          names = { plural = PLURAL, singular = PLURAL:sub(1, -2), kind = KIND, shortNames = json.array { SHORT } },
          versions = json.array { { name = 'v1', served = true, storage = true,
            schema = { openAPIV3Schema = { type = 'object', ['x-kubernetes-preserve-unknown-fields'] = true } } } },
        },
      })
      kube.wait('crd', crd_name, function(crd)
        -- conditions is json.null (truthy) until the apiserver fills it in
        local conds = crd and crd.status and crd.status.conditions
        for _, c in ipairs(type(conds) == 'table' and conds or {}) do
          if c.type == 'Established' and c.status == 'True' then return true end
        end
      end, 30)
      local g = kube.create(KIND, { metadata = { name = 'g1', namespace = NS }, spec = { size = 2 } })
      local by_short = kube.get(SHORT, 'g1', { namespace = NS })
      local by_full = kube.get(crd_name, 'g1', { namespace = NS })
      print(json.encode({ api = g.apiVersion, uid = g.metadata.uid, short = by_short.metadata.uid,
        full = by_full.metadata.uid }))
    ]]
    must(res)
    local k = json.decode(must(h.kubectl('get ' .. PLURAL .. '.' .. GROUP .. ' g1 -n ' .. NS .. ' -o json')).out)
    assert.are.same({ api = GROUP .. '/v1', uid = k.metadata.uid, short = k.metadata.uid, full = k.metadata.uid },
      res.json)
    assert.are.equal(2, k.spec.size)
  end)

  it('reads discovery once per run and again only on a miss', function()
    local res = must(run [[
      local core = require('kube.core')
      kube.resource('cm')
      local after_first = core.requests()
      kube.resource('deploy'); kube.resource('hr'); kube.resource('ConfigMap')
      local after_hits = core.requests()
      local known = kube.has_resource('no-such-things')
      print(json.encode({ first = after_first, hits = after_hits - after_first,
        miss = core.requests() - after_hits, known = known }))
    ]])
    assert.is_true(res.json.first > 0)
    assert.are.equal(0, res.json.hits)
    assert.are.equal(res.json.first, res.json.miss) -- one full refetch, no more
    assert.is_false(res.json.known)
  end)

  it('reports an unknown resource type as kubectl does', function()
    local k = h.kubectl('get no-such-things -n ' .. NS)
    assert.are_not.equal(0, k.code)
    local res = must(run [[
      local ok, err = pcall(kube.get, 'no-such-things', 'x', { namespace = NS })
      print(json.encode({ ok = ok, reason = err.reason, message = err.message }))
    ]])
    assert.is_false(res.json.ok)
    assert.are.equal('UnknownResource', res.json.reason)
    assert.are.equal(k.err:match('error: (.-)\n?$'), res.json.message)
  end)
end)
