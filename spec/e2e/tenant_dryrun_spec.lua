-- A failed record's journal names the cluster each write went to. A dry
-- run persists nothing on any cluster: a Lua migration's writes to a
-- tenant cluster (kube.cluster) go as dry runs, and a shell migration that
-- connects to another cluster on its own (a kubeconfig it wrote from a
-- Secret: legacy 4 and 5 did) is reported unpredictable and not run under
-- exec --dry-run, run --dry-run and preview. Real apiservers: the testenv
-- and a tenant from tools/testenv tenant.
local h = require('support.helpers')
local cluster = require('support.cluster')
local fixture = require('support.fixture')
local runner = require('support.runner')
local tenant = require('support.tenant')
local json = require('json')

describe('#e2e a dry run over tenant clusters', function()
  local up, ns, ledger_ns
  -- the legacy pattern: the tenant's kubeconfig out of its Secret into a
  -- file, then kubectl --kubeconfig past the runner's gateway
  local function shell_body(secret_ns)
    return table.concat({
      'cfg=$(mktemp)',
      string.format("kubectl get secret -n %s up-admin-kubeconfig -o jsonpath='{.data.super-admin\\.conf}' | base64 -d > \"$cfg\"",
        secret_ns),
      'kubectl --kubeconfig="$cfg" label configmap target -n default touched=yes --overwrite',
      'rm -f "$cfg"',
    }, '\n')
  end
  local LUA_BODY = [[
local kube = require('kube')
local t = assert(kube.cluster { secret = { namespace = %q, name = 'up-admin-kubeconfig' } })
t.patch('configmaps', 'target', { metadata = { labels = { lua = 'yes' } } }, { namespace = 'default' })
t.create('configmaps', { metadata = { name = 'created-by-lua', namespace = 'default' } })
]]

  setup(function()
    h.need_cluster()
    if not tenant.available() then return end
    up = tenant.start('dry')
    ns = cluster.namespace('tenants-dry')
    tenant.secret(up, ns, 'up-admin-kubeconfig')
    h.must(up.kc('create configmap target -n default'))
    ledger_ns = runner.new_ns()
    runner.make_ledger(ledger_ns, {})
  end)
  teardown(function()
    if up then up.stop() end
    runner.delete_namespaces()
    cluster.cleanup()
  end)

  local function need() return tenant.need(up, pending) end

  local function target_labels() return up.kc_json('get configmap target -n default').metadata.labels or {} end

  local function tree()
    return fixture.tree {
      batches = { { '00001-v1', { 'shell-reaches-tenant', 'lua-writes-tenant' } } },
      scripts = {
        ['shell-reaches-tenant'] = { shell = true, body = shell_body(ns) },
        ['lua-writes-tenant'] = { body = string.format(LUA_BODY, ns) },
      },
    }
  end

  it('exec --dry-run does not run a shell script that connects to a tenant on its own, and says why', function()
    if not need() then return end
    local f = h.write(os.tmpname() .. '.sh', '# cozystack-migration: on-error=abort\n' .. shell_body(ns) .. '\n')
    local res = h.cozy('exec', '--dry-run', 'shell-reaches-tenant', f)
    local d = json.decode(res.out:match('([^\n]+)\n?$'))
    assert.are.equal('unpredictable', d.outcome, res.out .. res.err)
    assert.are.equal('ReachesOtherCluster', d.reason)
    assert.truthy(h.has(d.message, 'line 4: --kubeconfig'), d.message)
    assert.is_nil(target_labels().touched)
    -- run for real and confined (docs/internals.md "Confinement": TCP to its
    -- gateway alone), it cannot reach the tenant either
    res = h.cozy('exec', 'shell-reaches-tenant', f)
    assert.is_nil(target_labels().touched, res.out .. res.err)
    -- and the static check is no false alarm: unconfined (a kernel without
    -- Landlock, outside a cluster), the same script labels the tenant's object
    res = h.cozy('exec', 'shell-reaches-tenant', f, { env = { COZY_CONFINE_ABI = '0' } })
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.are.equal('yes', target_labels().touched)
    h.must(up.kc('label configmap target -n default touched-'))
  end)

  it('run --dry-run persists nothing on either cluster: the tenant script unpredictable, the Lua one dry', function()
    if not need() then return end
    local before = up.kc_json('get configmap target -n default').metadata.resourceVersion
    local ledger = runner.get_ledger(ledger_ns).metadata.resourceVersion
    local res = runner.run(tree(), ledger_ns, '--dry-run')
    assert.are.equal(0, res.code, res.out .. res.err)
    assert.truthy(h.has(res.out .. res.err, 'shell-reaches-tenant ... unpredictable (not run in a dry run): line 4: --kubeconfig'),
      res.out .. res.err)
    assert.are.equal(before, up.kc_json('get configmap target -n default').metadata.resourceVersion)
    assert.are_not.equal(0, up.kc('get configmap created-by-lua -n default').code)
    assert.are.equal(ledger, runner.get_ledger(ledger_ns).metadata.resourceVersion)
  end)

  it('records, for a migration that failed, which cluster each write went to', function()
    if not need() then return end
    local own = runner.new_ns()
    runner.make_ledger(own, {})
    local dir = fixture.tree {
      batches = { { '00001-v1', { 'tenant-then-fail' } } },
      scripts = { ['tenant-then-fail'] = { on_error = 'warn', body = string.format([[
local kube = require('kube')
local t = assert(kube.cluster { secret = { namespace = %q, name = 'up-admin-kubeconfig' } })
t.create('configmaps', { metadata = { name = 'recorded-write', namespace = 'default' } })
kube.create('configmaps', { metadata = { name = 'recorded-write', namespace = %q } })
error('after two writes')
]], ns, own) } },
    }
    local res = runner.run(dir, own)
    assert.are.equal(0, res.code, res.out .. res.err)
    local rec = runner.records(own)['tenant-then-fail']
    assert.are.equal('failed', rec.state, json.encode(rec))
    local by = {}
    for _, e in ipairs(rec.journal.entries) do by[e.namespace] = e end
    assert.are.equal(ns .. '/up-admin-kubeconfig', by.default.cluster)
    assert.is_nil(by[own].cluster)
    h.must(up.kc('delete configmap recorded-write -n default'))
  end)

  it('preview reports the tenant script unpredictable and runs it not', function()
    if not need() then return end
    local before = up.kc_json('get configmap target -n default').metadata.resourceVersion
    local res = h.cozy('preview', '--dir', tree(), '--namespace', ledger_ns, '-o', 'json')
    assert.are.equal(0, res.code, res.out .. res.err)
    local d = json.decode(res.out)
    local by = {}
    for _, m in ipairs(d.migrations) do by[m.migration] = m end
    assert.are.equal('unpredictable', by['shell-reaches-tenant'].outcome)
    assert.truthy(h.has(by['shell-reaches-tenant'].message, '--kubeconfig'), by['shell-reaches-tenant'].message)
    assert.are.equal(before, up.kc_json('get configmap target -n default').metadata.resourceVersion)
    assert.are_not.equal(0, up.kc('get configmap created-by-lua -n default').code)
  end)
end)
