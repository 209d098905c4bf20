-- migrations/background/tenant-ancestor-labels.lua, run as the runner runs
-- it. The migration walks every namespace of the cluster, and other specs
-- (and earlier runs: namespaces never finish deleting on the testenv) leave
-- namespaces behind, so each case makes a tenant tree under a root name no
-- other run shares and looks at those namespaces only.
local h = require('support.helpers')
local cluster = require('support.cluster')
local migration = require('support.migration')

local SLUG = 'tenant-ancestor-labels'
local P = 'tenant.cozystack.io/'

local function labels(name) return cluster.get('namespaces', name).metadata.labels or {} end

-- the tenant.cozystack.io/ labels of a namespace
local function tenant_labels(name)
  local out = {}
  for k, v in pairs(labels(name)) do
    if k:sub(1, #P) == P then out[k] = v end
  end
  return out
end

-- tree() -> root, {names}: tenant-<t>, tenant-<t>-b, tenant-<t>-b-c
local function tree()
  local t = 'tenant-' .. cluster.unique()
  local names = { t, t .. '-b', t .. '-b-c' }
  for _, n in ipairs(names) do cluster.namespace_named(n) end
  return t, names
end

describe('#e2e migration ' .. SLUG, function()
  setup(function()
    assert.is_true(h.has_cluster(), 'KUBECONFIG must point at a cluster (tools/run-tests sets it)')
    -- The root itself must exist to show it is left alone; it is not this
    -- spec's to delete.
    if not cluster.get('namespaces', 'tenant-root') then
      cluster.apply({ apiVersion = 'v1', kind = 'Namespace', metadata = { name = 'tenant-root' } })
    end
  end)
  teardown(function() cluster.cleanup() end)

  it('is recorded as failed and does not stop the upgrade when it fails (on-error=warn)', function()
    assert.are.equal('warn', migration.header(SLUG).on_error)
  end)

  it('labels each tenant namespace with the root and every ancestor prefix, itself included', function()
    local t, names = tree()
    local root_rv = cluster.get('namespaces', 'tenant-root').metadata.resourceVersion
    migration.assert_ok(migration.run(SLUG))
    assert.are.same({ [P .. 'tenant-root'] = '', [P .. t] = '' }, tenant_labels(names[1]))
    assert.are.same({ [P .. 'tenant-root'] = '', [P .. t] = '', [P .. t .. '-b'] = '' }, tenant_labels(names[2]))
    assert.are.same({ [P .. 'tenant-root'] = '', [P .. t] = '', [P .. t .. '-b'] = '', [P .. t .. '-b-c'] = '' },
      tenant_labels(names[3]))
    assert.are.equal(root_rv, cluster.get('namespaces', 'tenant-root').metadata.resourceVersion)
  end)

  it('keeps the labels a namespace already has', function()
    local t = 'tenant-' .. cluster.unique()
    cluster.namespace_named(t, { team = 'storage', [P .. 'tenant-root'] = '' })
    migration.assert_ok(migration.run(SLUG))
    local l = labels(t)
    assert.are.equal('storage', l.team)
    assert.are.same({ [P .. 'tenant-root'] = '', [P .. t] = '' }, tenant_labels(t))
  end)

  it('leaves namespaces that are not tenants alone', function()
    local u = cluster.unique()
    local others = { 'notenant-' .. u, 'tenants-' .. u, 'x-tenant-' .. u }
    for _, n in ipairs(others) do cluster.namespace_named(n) end
    local watched = { { 'namespaces', names = others } }
    local before = migration.snapshot(watched)
    migration.assert_ok(migration.run(SLUG))
    assert.are.same({}, migration.diff(before, migration.snapshot(watched)))
  end)

  it('leaves a tenant- namespace that is no tenant name alone, and says so', function()
    local odd = 'tenant-' .. cluster.unique() .. '--x'
    cluster.namespace_named(odd)
    local watched = { { 'namespaces', names = { odd } } }
    local before = migration.snapshot(watched)
    local res = migration.assert_ok(migration.run(SLUG))
    assert.matches('"' .. odd .. '" is not a tenant name', res.output, 1, true)
    assert.are.same({}, migration.diff(before, migration.snapshot(watched)))
  end)

  it('changes nothing when every tenant namespace is labelled', function()
    local t = 'tenant-' .. cluster.unique()
    local names = { t, t .. '-b' }
    cluster.namespace_named(names[1], { [P .. 'tenant-root'] = '', [P .. t] = '' })
    cluster.namespace_named(names[2], { [P .. 'tenant-root'] = '', [P .. t] = '', [P .. t .. '-b'] = '' })
    local watched = { { 'namespaces', names = names } }
    local before = migration.snapshot(watched)
    migration.assert_ok(migration.run(SLUG))
    assert.are.same({}, migration.diff(before, migration.snapshot(watched)))
  end)

  it('changes nothing when it runs a second time', function()
    local _, names = tree()
    migration.assert_idempotent(SLUG, { { 'namespaces', names = names } })
  end)

  it('labels every tenant it may, then fails naming each namespace it may not', function()
    local t, names = tree()
    h.must(h.kc(string.format('label namespace %s cozy-migrate.spec/frozen=%s', names[2], t)))
    local res = migration.run_refused(SLUG, { resource = 'namespaces', selector = { ['cozy-migrate.spec/frozen'] = t },
      message = 'frozen by the spec', probe = { name = names[2] } })
    migration.assert_fleet_failed(res, nil, { names[2] }, 'frozen by the spec')
    assert.are.same({}, tenant_labels(names[2]))
    assert.are.equal('', tenant_labels(names[1])[P .. t])
    assert.are.equal('', tenant_labels(names[3])[P .. t .. '-b-c'])
  end)
end)
