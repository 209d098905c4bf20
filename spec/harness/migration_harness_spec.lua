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

  it("stops a migration at its header's timeout", function()
    local f = script('spins', '-- cozystack-migration: on-error=abort\n-- cozystack-migration: timeout=1s',
      'while true do end')
    local t0 = os.time()
    local res = migration.run(f)
    assert.are.same({ 'timeout', 'Timeout', 'timed out after 1s' }, { res.outcome, res.reason, res.message })
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
