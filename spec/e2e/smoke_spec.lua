-- End to end against the real local kube-apiserver (tools/testenv): objects
-- made with the built kubectl are read and patched through `cozy-migrate lua`
-- and the result is checked with kubectl again.
local h = require('support.helpers')
local json = require('json')

local NS = 'smoke-' .. tostring(os.time())
local CRD = [[
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.smoke.cozystack.io
spec:
  group: smoke.cozystack.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
]]

local must = h.must

describe('#e2e the smoke test', function()
  setup(function()
    h.need_cluster()
    local dir = h.tmpdir()
    h.write(dir .. '/widget.yaml', string.format([[
apiVersion: smoke.cozystack.io/v1
kind: Widget
metadata: {name: w1, namespace: %s}
spec: {size: 3}
]], NS))
    must(h.kubectl('create namespace ' .. NS))
    h.apply_crd(CRD)
    must(h.kubectl('apply -f ' .. dir .. '/widget.yaml'))
  end)

  teardown(function()
    h.kubectl('delete namespace ' .. NS .. ' --wait=false')
  end)

  it('reads a custom object by short name, merge-patches a label, and kubectl sees it', function()
    local res = h.lua(string.format([[
      local kube = require('kube')
      local w = kube.get('wdg', 'w1', { namespace = %q })
      assert(w, 'widget not found')
      assert(w.spec.size == 3, 'spec.size is ' .. tostring(w.spec.size))
      kube.patch('wdg', 'w1', { metadata = { labels = { smoke = 'yes' } } }, { namespace = %q })
      local again = kube.get('widgets.smoke.cozystack.io', 'w1', { namespace = %q })
      print(again.metadata.labels.smoke)
    ]], NS, NS, NS))
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('yes\n', res.out)
    local k = must(h.kubectl('get widget w1 -n ' .. NS .. ' -o json'))
    local obj = json.decode(k.out)
    assert.are.equal('yes', obj.metadata.labels.smoke)
    assert.are.equal(3, obj.spec.size)
  end)

  it('returns nil for an object that does not exist', function()
    local res = h.lua(string.format([[
      local kube = require('kube')
      print(kube.get('Widget', 'nope', { namespace = %q }) == nil)
    ]], NS))
    assert.are.equal(0, res.code, res.err)
    assert.are.equal('true\n', res.out)
  end)
end)
