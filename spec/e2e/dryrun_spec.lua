-- Dry run: every write goes with dryRun=All, the cluster keeps its state, and
-- each intended change is printed with the fields it would change, as the
-- apiserver itself computed them.
local h = require('support.helpers')
local json = require('json')

local NS = 'dryrun-' .. tostring(os.time())
local P = NS:gsub('%-', '%%-') -- NS as a Lua pattern

describe('#e2e a dry run', function()
  setup(function()
    assert.are.equal(0, h.kubectl('create namespace ' .. NS).code)
    assert.are.equal(0, h.kubectl('-n ' .. NS .. ' create configmap settings --from-literal=mode=ha').code)
  end)
  teardown(function() h.kubectl('delete namespace ' .. NS .. ' --wait=false') end)

  -- Every resourceVersion and deletionTimestamp in NS, by kind/name.
  local function state()
    local out = {}
    for _, kind in ipairs { 'configmaps', 'secrets', 'serviceaccounts' } do
      for _, o in ipairs(h.kubectl_json('get ' .. kind .. ' -n ' .. NS).items) do
        out[kind .. '/' .. o.metadata.name] = o.metadata.resourceVersion ..
          (o.metadata.deletionTimestamp and ' deleting' or '') ..
          (o.metadata.finalizers and (' ' .. table.concat(o.metadata.finalizers, ',')) or '')
      end
    end
    return out
  end

  it('prints each intended change and changes nothing', function()
    local before = state()
    local res = h.lua(string.format([[
      local kube = require('kube')
      local ns = %q
      kube.patch('cm', 'settings', { metadata = { labels = { x = 'y' } }, data = { mode = 'single' } }, { namespace = ns })
      kube.create('cm', { metadata = { name = 'fresh' }, data = { a = '1' } }, { namespace = ns })
      kube.update('cm', 'settings', function(o) o.data.extra = 'e' end, { namespace = ns })
      kube.delete('cm', 'settings', { namespace = ns })
    ]], NS), '--dry-run')
    assert.are.equal(0, res.code, res.err)
    assert.matches('dry%-run: would patch configmaps ' .. P .. '/settings, 2 fields:', res.out)
    assert.matches('  metadata%.labels%.x: %(absent%) %-> "y"', res.out)
    assert.matches('  data%.mode: "ha" %-> "single"', res.out)
    assert.matches('dry%-run: would create configmaps ' .. P .. '/fresh', res.out)
    assert.matches('dry%-run: would replace configmaps ' .. P .. '/settings, 1 field:\n  data%.extra: %(absent%) %-> "e"', res.out)
    assert.matches('dry%-run: would delete configmaps ' .. P .. '/settings', res.out)
    local cm = json.decode(h.kubectl('-n ' .. NS .. ' get cm settings -o json').out)
    assert.are.same({ mode = 'ha' }, cm.data)
    assert.is_nil((cm.metadata.labels or {}).x)
    assert.are_not.equal(0, h.kubectl('-n ' .. NS .. ' get cm fresh').code)
    assert.are.same(before, state(), 'the dry run changed or deleted something')
  end)

  for _, propagation in ipairs { 'Background', 'Foreground', 'Orphan' } do
    it('deletes nothing with propagation ' .. propagation .. ' (a DeleteOptions body says dryRun too)', function()
      h.must(h.kubectl('-n ' .. NS .. ' create configmap doomed-' .. propagation:lower() .. ' --from-literal=a=1'))
      local before = state()
      local res = h.lua(string.format([[
        require('kube').delete('cm', %q, { namespace = %q, propagation = %q })
      ]], 'doomed-' .. propagation:lower(), NS, propagation), '--dry-run')
      assert.are.equal(0, res.code, res.err)
      assert.matches('dry%-run: would delete configmaps ' .. P .. '/doomed%-' .. propagation:lower(), res.out)
      h.sleep(0.5) -- a collector acting on a persisted deletionTimestamp would be quick
      assert.are.same(before, state(), 'the dry run changed or deleted something')
    end)
  end

  it('refuses a TokenRequest, whose dry-run answer would be a live token', function()
    h.must(h.kubectl('-n ' .. NS .. ' create serviceaccount robot'))
    local before = state()
    local res = h.lua(string.format([[
      local kube = require('kube')
      kube.resource('serviceaccounts')
      local sent = kube.requests()
      local ok, err = pcall(kube.create, 'serviceaccounts', { apiVersion = 'authentication.k8s.io/v1',
        kind = 'TokenRequest', spec = { audiences = { 'x' } } }, { namespace = %q, subresource = 'robot/token' })
      print(ok, type(err) == 'table' and err.reason, kube.requests() - sent)
      print(type(err) == 'table' and err.message or tostring(err))
    ]], NS), '--dry-run')
    assert.are.equal(0, res.code, res.err)
    assert.matches('^false\tDryRunRefused\t0\n', res.out)
    h.contains(res.out, 'live credential')
    h.lacks(res.out, 'eyJ', 'a token')
    assert.are.same(before, state())
  end)

  it('says so when a write would change nothing', function()
    local before = state()
    local res = h.lua(string.format([[
      require('kube').patch('cm', 'settings', { data = { mode = 'ha' } }, { namespace = %q })
    ]], NS), '--dry-run')
    assert.are.equal(0, res.code, res.err)
    assert.matches('dry%-run: patch configmaps ' .. P .. '/settings: no change', res.out)
    assert.are.same(before, state())
  end)
end)
