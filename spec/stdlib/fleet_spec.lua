-- stdlib/fleet.lua against the real apiserver. Each case marks its own
-- ConfigMaps with a label unique to it and walks only those, since the
-- cluster holds other specs' objects too.
local h = require('support.helpers')
local cluster = require('support.cluster')
local kube = require('kube')
local fleet = require('fleet')

local NS1, NS2

local function cms(set, specs)
  local objs = {}
  for _, s in ipairs(specs) do
    objs[#objs + 1] = { apiVersion = 'v1', kind = 'ConfigMap',
      metadata = { name = s[2], namespace = s[1], labels = { ['cozy-migrate.spec/set'] = set } },
      data = { v = s[3] or 'old' } }
  end
  cluster.apply(objs)
end

local function selector(set) return { ['cozy-migrate.spec/set'] = set } end

-- bump(obj) patches data.v to 'new' unless it already is: the shape of a
-- migration step.
local function bump(obj)
  if obj.data and obj.data.v == 'new' then return false end
  kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = obj.metadata.namespace })
  return true
end

local function value(ns, name) return cluster.get('configmap', name, ns).data.v end

describe('#e2e fleet.each', function()
  setup(function()
    assert.is_true(h.has_cluster(), 'KUBECONFIG must point at a cluster (tools/run-tests sets it)')
    NS1, NS2 = cluster.namespace('fleet-a'), cluster.namespace('fleet-b')
  end)
  teardown(function() cluster.cleanup('configmaps') end)

  it('visits every object in every namespace and counts what fn changed', function()
    local set = cluster.unique('all')
    cms(set, { { NS1, 'a1' }, { NS1, 'a2', 'new' }, { NS2, 'b1' } })
    local seen = {}
    local res = fleet.each('configmaps', { label_selector = selector(set) }, function(obj)
      seen[#seen + 1] = obj.metadata.namespace .. '/' .. obj.metadata.name
      return bump(obj)
    end)
    table.sort(seen)
    assert.are.same({ NS1 .. '/a1', NS1 .. '/a2', NS2 .. '/b1' }, seen)
    assert.are.same({ seen = 3, changed = 2, failed = 0 }, { seen = res.seen, changed = res.changed, failed = res.failed })
    assert.are.equal('new', value(NS1, 'a1'))
    assert.are.equal('new', value(NS2, 'b1'))
  end)

  it('walks one namespace when opts.namespace names it', function()
    local set = cluster.unique('one')
    cms(set, { { NS1, 'o1' }, { NS2, 'o2' } })
    local res = fleet.each('configmaps', { namespace = NS2, label_selector = selector(set) }, bump)
    assert.are.equal(1, res.seen)
    assert.are.equal('old', value(NS1, 'o1'))
    assert.are.equal('new', value(NS2, 'o2'))
  end)

  it('keeps going past failing objects, then raises one FleetFailed error naming each', function()
    local set = cluster.unique('fail')
    cms(set, { { NS1, 'f1' }, { NS1, 'f2-broken' }, { NS2, 'f3' }, { NS2, 'f4-broken' } })
    local ok, err = pcall(fleet.each, 'configmaps', { label_selector = selector(set) }, function(obj)
      if obj.metadata.name:match('broken') then error('cannot migrate ' .. obj.metadata.name, 0) end
      return bump(obj)
    end)
    assert.is_false(ok)
    assert.is_true(kube.is_error(err))
    assert.are.equal('FleetFailed', err.reason)
    assert.are.equal(0, err.code)
    assert.are.same({ 4, 2 }, { err.seen, err.changed })
    assert.are.same({
      { namespace = NS1, name = 'f2-broken', message = 'cannot migrate f2-broken' },
      { namespace = NS2, name = 'f4-broken', message = 'cannot migrate f4-broken' },
    }, err.failed)
    assert.matches('2 of 4 objects failed', err.message, 1, true)
    assert.matches(NS1 .. '/f2-broken: cannot migrate f2-broken', err.message, 1, true)
    assert.matches(NS2 .. '/f4-broken: cannot migrate f4-broken', err.message, 1, true)
    -- the objects after the first failure were still migrated
    assert.are.equal('new', value(NS2, 'f3'))
  end)

  it('keeps the code and reason of an apiserver refusal for each failed object', function()
    local set = cluster.unique('deny')
    cms(set, { { NS1, 'd1' }, { NS2, 'd2' } })
    h.must(h.kc(string.format('label configmap d2 -n %s cozy-migrate.spec/frozen=%s', NS2, set)))
    local p = cluster.deny { resource = 'configmaps', selector = { ['cozy-migrate.spec/frozen'] = set },
      message = 'frozen by policy', probe = { name = 'd2', namespace = NS2 } }
    local ok, err = pcall(fleet.each, 'configmaps', { label_selector = selector(set) }, bump)
    cluster.allow(p)
    assert.is_false(ok)
    assert.are.equal(1, #err.failed)
    local f = err.failed[1]
    assert.are.same({ NS2, 'd2', 403, 'Forbidden' }, { f.namespace, f.name, f.code, f.reason })
    assert.is_true(kube.is_forbidden(f.error))
    assert.matches('frozen by policy', err.message, 1, true)
    assert.are.equal('new', value(NS1, 'd1'))
    assert.are.equal('old', value(NS2, 'd2'))
  end)

  it('counts a fn that returns something other than true, false or nil as failed', function()
    local set = cluster.unique('ret')
    cms(set, { { NS1, 'r1' } })
    local ok, err = pcall(fleet.each, 'configmaps', { label_selector = selector(set) }, function(obj)
      return kube.patch('configmaps', obj.metadata.name, { data = { v = 'new' } }, { namespace = NS1 })
    end)
    assert.is_false(ok)
    assert.matches('fn returned a table', err.failed[1].message, 1, true)
  end)

  it('returns the counts and the failures with best_effort instead of raising', function()
    local set = cluster.unique('best')
    cms(set, { { NS1, 'e1' }, { NS1, 'e2-broken' } })
    local res = fleet.each('configmaps', { label_selector = selector(set), best_effort = true }, function(obj)
      if obj.metadata.name:match('broken') then error('no', 0) end
      return bump(obj)
    end)
    assert.are.same({ 2, 1, 1 }, { res.seen, res.changed, res.failed })
    assert.are.equal('e2-broken', res.failures[1].name)
  end)

  it('logs the failed objects as an error under best_effort', function()
    local set = cluster.unique('log')
    cms(set, { { NS2, 'g1-broken' }, { NS2, 'g2' } })
    local res = h.must(h.kube_script({ SET = set }, [[
      local fleet = require('fleet')
      local r = fleet.each('configmaps', { label_selector = { ['cozy-migrate.spec/set'] = SET }, best_effort = true },
        function(obj) if obj.metadata.name:match('broken') then error('refused here', 0) end return false end)
      print(json.encode({ seen = r.seen, failed = r.failed }))
    ]]))
    assert.are.same({ seen = 2, failed = 1 }, res.json)
    assert.matches('error: configmaps: 1 of 2 objects failed', res.err, 1, true)
    assert.matches(NS2 .. '/g1-broken: refused here', res.err, 1, true)
  end)

  it('raises an error listing the fleet as it came, before calling fn', function()
    local called = false
    local ok, err = pcall(fleet.each, 'nosuchthings.example.com', {}, function() called = true end)
    assert.is_false(ok)
    assert.are.equal('UnknownResource', err.reason)
    assert.is_false(called)
  end)

  it('returns zero counts for a kind with no objects', function()
    local res = fleet.each('configmaps', { label_selector = selector(cluster.unique('none')) },
      function() error('not reached') end)
    assert.are.same({ 0, 0, 0 }, { res.seen, res.changed, res.failed })
  end)
end)
