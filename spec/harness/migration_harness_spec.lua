-- The migration harness (spec/support/migration.lua) is what every
-- migration spec trusts, so it is proven here: it runs a script the way the
-- runner does, and assert_idempotent fails, naming the object, on a
-- migration that changes something every time.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')

local NS, dir

local function script(name, header, body)
  return h.write(dir .. '/' .. name .. '.lua', header .. '\n' .. body)
end

describe('#e2e the migration harness', function()
  setup(function()
    assert.is_true(h.has_cluster(), 'KUBECONFIG must point at a cluster (tools/run-tests sets it)')
    NS = cluster.namespace('harness')
    dir = h.tmpdir()
    cluster.apply({ apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = 'target', namespace = NS } })
  end)
  teardown(function()
    cluster.cleanup('configmaps')
    h.run('rm -rf ' .. h.q(dir))
  end)

  it('runs a file in the sandbox and returns its outcome and output', function()
    local f = script('says-hello', '-- cozystack-migration: on-error=warn', [[
      require('log').info('hello from %s', 'the sandbox')
      assert(io == nil and os.getenv == nil, 'not sandboxed')
    ]])
    local res = migration.assert_ok(migration.run(f))
    assert.matches('[says-hello] info: hello from the sandbox', res.output, 1, true)
    assert.are.equal('warn', res.header.on_error)
  end)

  it("stops a migration at its header's timeout, naming the header's line", function()
    local f = script('spins', '-- cozystack-migration: on-error=abort\n-- cozystack-migration: timeout=1s',
      'while true do end')
    local t0 = os.time()
    local res = migration.run(f)
    assert.are.same({ 'timeout', 'Timeout', 'timed out after 1s (timeout=1s, ' .. f .. ':2)' },
      { res.outcome, res.reason, res.message })
    assert.is_true(os.time() - t0 < 30)
  end)

  it('refuses a file whose header does not parse', function()
    local f = script('headless', '-- no header here', 'local x = 1')
    assert.has_error(function() migration.run(f) end)
  end)

  it('fails assert_idempotent, naming the object, for a migration that writes on every run', function()
    local f = script('stamps', '-- cozystack-migration: on-error=abort', string.format([[
      local kube = require('kube')
      kube.patch('configmaps', 'target', { data = { at = tostring(os.clock()) .. tostring({}) } }, { namespace = %q })
    ]], NS))
    local ok, err = pcall(migration.assert_idempotent, f, { 'configmaps' })
    assert.is_false(ok)
    assert.matches('configmaps ' .. NS .. '/target: resourceVersion', tostring(err), 1, true)
  end)

  it('passes assert_idempotent for a migration that writes only what differs', function()
    local f = script('sets-once', '-- cozystack-migration: on-error=abort', string.format([[
      local kube = require('kube')
      local cm = kube.get('configmaps', 'target', { namespace = %q })
      if (cm.data or {}).fixed ~= 'yes' then
        kube.patch('configmaps', 'target', { data = { fixed = 'yes' } }, { namespace = %q })
      end
    ]], NS, NS))
    local first = migration.assert_idempotent(f, { 'configmaps' })
    assert.are.equal('ok', first.outcome)
    assert.are.equal('yes', cluster.get('configmap', 'target', NS).data.fixed)
  end)

  it('fails assert_idempotent for a fleet whose fn changes objects without returning true', function()
    local f = script('forgets-return', '-- cozystack-migration: on-error=abort', string.format([[
      local kube, fleet = require('kube'), require('fleet')
      fleet.each('configmaps', { namespace = %q, field_selector = 'metadata.name=target' }, function(cm)
        if (cm.data or {}).seen ~= 'yes' then
          kube.patch('configmaps', cm.metadata.name, { data = { seen = 'yes' } }, { namespace = %q })
        end
      end)
    ]], NS, NS))
    local ok, err = pcall(migration.assert_idempotent, f, { 'configmaps' })
    assert.is_false(ok)
    h.contains(tostring(err), 'fleet.each counted changes its fn did not report (return true from fn')
    h.contains(tostring(err), 'configmaps: fn returned nothing (or false) for 1 object(s) its writes changed (' ..
      NS .. '/target)')
  end)

  it('refuses to compare when the watched resources hold nothing', function()
    local f = script('noop', '-- cozystack-migration: on-error=abort', '')
    local ok, err = pcall(migration.assert_idempotent, f, { { 'configmaps', namespaces = { cluster.namespace('empty') } } })
    assert.is_false(ok)
    assert.matches('hold no object', tostring(err), 1, true)
  end)
end)

describe('the write journal check', function()
  it('passes a run whose journal changed nothing, and names each write of one that did', function()
    assert.is_true(migration.assert_journal_unchanged({ journal = { writes = 2, changed = 0, entries = {
      { verb = 'patch', resource = 'configmaps', namespace = 'a', name = 'x', status = 200, changed = false },
    } } }))
    local ok, err = pcall(migration.assert_journal_unchanged, { journal = { writes = 2, changed = 1, entries = {
      { verb = 'patch', resource = 'configmaps', namespace = 'a', name = 'x', status = 200, changed = false },
      { verb = 'patch', resource = 'namespaces', name = 'tenant-a', status = 200, changed = true },
    } } })
    assert.is_false(ok)
    assert.matches('changed 1 object(s)', tostring(err), 1, true)
    assert.matches('patch namespaces tenant-a (200)', tostring(err), 1, true)
    assert.is_nil(tostring(err):find('configmaps a/x', 1, true))
  end)

  it('has nothing to check until exec reports a journal', function()
    assert.is_false(migration.assert_journal_unchanged({ outcome = 'ok' }))
  end)
end)

describe('the fixture CRD check', function()
  local cluster_mod = require('support.cluster')
  local function crd(versions, extra)
    local c = { spec = { group = 'example.io', scope = 'Namespaced',
      names = { kind = 'Thing', plural = 'things' }, versions = versions } }
    for k, v in pairs(extra or {}) do c.spec[k] = v end
    return c
  end
  local function v(name, schema, o)
    local r = { name = name, served = true, schema = { openAPIV3Schema = schema } }
    for k, val in pairs(o or {}) do r[k] = val end
    return r
  end
  local KEEPS = { type = 'object', ['x-kubernetes-preserve-unknown-fields'] = true }

  it('finds nothing missing in a CRD that has what the fixture has, and more', function()
    local want = crd({ v('v1', { type = 'object', properties = { spec = { type = 'object', properties = {
      version = { type = 'string' } } } } }) })
    local have = crd({ v('v1', { type = 'object', properties = { spec = { type = 'object', properties = {
      version = { type = 'string' }, replicas = { type = 'integer' } } } } }), v('v1beta1', KEEPS) })
    assert.are.same({}, cluster_mod.crd_gaps(want, have))
  end)

  it('names each version, subresource and field the served CRD lacks', function()
    local want = crd({ v('v1', { type = 'object', properties = { spec = { type = 'object', properties = {
      version = { type = 'string' }, size = { type = 'integer' } } } } }, { subresources = { status = {} } }),
      v('v2', KEEPS) })
    local have = crd({ v('v1', { type = 'object', properties = { spec = { type = 'object', properties = {
      version = { type = 'integer' } } } } }) }, { scope = 'Cluster' })
    assert.are.same({
      'scope Cluster, the fixture has Namespaced',
      'version v1: no status subresource (the fixture has one)',
      'version v1: openAPIV3Schema.spec.size: not in the served schema',
      'version v1: openAPIV3Schema.spec.version: type integer, the fixture has string',
      'version v2: not in the served CRD',
    }, cluster_mod.crd_gaps(want, have))
  end)

  it('says when the fixture keeps unknown fields the served schema prunes', function()
    assert.are.same({ 'version v1: openAPIV3Schema: the fixture keeps unknown fields here ' ..
      '(x-kubernetes-preserve-unknown-fields), the served schema prunes them' },
      cluster_mod.crd_gaps(crd({ v('v1', KEEPS) }), crd({ v('v1', { type = 'object', properties = {
        spec = { type = 'object' } } }) })))
  end)
end)

describe('#e2e cluster.apply', function()
  local ns
  setup(function()
    ns = 'foreign-' .. h.unique()
    -- made by someone else: kubectl, not the harness
    h.must(h.kc('create namespace ' .. ns))
    h.must(h.kc('create configmap theirs --from-literal=v=1 -n ' .. ns))
  end)
  teardown(function() h.kc('delete namespace --wait=false ' .. ns) end)

  it('refuses to overwrite an object this run did not create, changing nothing', function()
    local before = cluster.get('configmaps', 'theirs', ns)
    local ok, err = pcall(cluster.apply, { apiVersion = 'v1', kind = 'ConfigMap',
      metadata = { name = 'theirs', namespace = ns }, data = { v = '2' } })
    assert.is_false(ok)
    h.contains(tostring(err), 'ConfigMap ' .. ns .. '/theirs exists and this spec run did not create it')
    assert.are.same(before, cluster.get('configmaps', 'theirs', ns))
  end)

  it('creates beside it, labelled as this run\'s, and may then apply it again', function()
    local obj = { apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = 'mine', namespace = ns },
      data = { v = '1' } }
    cluster.apply(obj)
    assert.are.equal(cluster.run_id(), cluster.get('configmaps', 'mine', ns).metadata.labels['cozy-migrate.spec/run'])
    obj.data.v = '2'
    cluster.apply(obj)
    assert.are.equal('2', cluster.get('configmaps', 'mine', ns).data.v)
  end)
end)
