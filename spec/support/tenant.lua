-- Tenant clusters for specs: more disposable apiservers beside the one the
-- specs run against, as the platform hosts clusters (Kamaji: each tenant
-- control plane's admin kubeconfig in a Secret of the management cluster).
--
-- start(prefix) runs `tools/testenv tenant up` (a second kube-apiserver on
-- the testenv's etcd under its own prefix: a separate cluster at the price
-- of one process) and returns {name=, kubeconfig=, kc=, kc_json=, stop=};
-- secret(t, ns, name [, labels]) stores its kubeconfig in the management
-- cluster as Kamaji does (key super-admin.conf). Every tenant a spec
-- started is stopped at the end of the run (busted's exit event) or when
-- the spec stops it itself (a cluster that is down); a spec file stays
-- runnable alone with tools/run-tests. Tenants exist on the testenv only:
-- available() says whether this run has it (against kind they are pending).
local h = require('support.helpers')
local json = require('json')

local M = {}

M.KEY = 'super-admin.conf'
M.LABEL = 'kamaji.clastix.io/component'
M.LABEL_VALUE = 'admin-kubeconfig'

local function started()
  local r = h.this_run()
  r.tenants = r.tenants or {}
  return r
end

local function down(name)
  local res = h.run(h.q(h.testenv) .. ' tenant down ' .. h.q(name))
  if res.code ~= 0 then io.stderr:write('spec cleanup: tenant ', name, ': ', res.err, '\n') end
end

local function clean_at_exit()
  local r = started()
  if r.tenant_cleanup then return end
  local ok, busted = pcall(require, 'busted')
  if not ok or type(busted) ~= 'table' or not busted.subscribe then return end
  r.tenant_cleanup = true
  busted.subscribe({ 'exit' }, function()
    for name in pairs(r.tenants) do down(name) end
    return nil, true
  end)
end

-- Whether this run can start tenants: the testenv in this checkout is up
-- and is the cluster the specs run against.
function M.available()
  local env = h.run(h.q(h.testenv) .. ' env')
  return env.code == 0 and env.out:match('KUBECONFIG=([^\n]+)') == os.getenv('KUBECONFIG')
end

-- need(t, pending): whether t, the tenant a spec's setup started, is up;
-- when it is not (no testenv tenants in this run: available() said no),
-- marks the case pending through busted's pending, the spec's to pass.
function M.need(t, pending)
  if not t then pending('tenant clusters need this checkout\'s tools/testenv') end
  return t ~= nil
end

-- start([prefix]) -> tenant: a fresh apiserver, named prefix-<8 hex>.
function M.start(prefix)
  local name = (prefix or 'tenant') .. '-' .. h.unique()
  clean_at_exit()
  local res = h.must(h.run(h.q(h.testenv) .. ' tenant up ' .. h.q(name)), 'tools/testenv tenant up ' .. name)
  local t = { name = name, kubeconfig = res.out:match('([^\n]+)\n?$') }
  started().tenants[name] = true
  -- kept: a tenant stopped later is still named by a Secret written after
  t.text = h.slurp(t.kubeconfig)
  t.server = t.text:match('server: (%S+)')
  function t.kc(args)
    return h.run(string.format('%s --kubeconfig %s %s', h.q(h.kubectl_bin()), h.q(t.kubeconfig), args))
  end
  function t.kc_json(args) return json.decode(h.must(t.kc(args .. ' -o json')).out) end
  -- apply(obj): an object (a table) applied in this tenant
  function t.apply(obj)
    local f = h.write(os.tmpname() .. '.json', json.encode(obj))
    local r = h.must(t.kc('apply -o json -f ' .. f), 'apply in tenant ' .. name)
    os.remove(f)
    return json.decode(r.out)
  end
  -- stop(): the apiserver goes away (its port then refuses): a tenant
  -- cluster that is down.
  function t.stop()
    down(name)
    started().tenants[name] = nil
  end
  return t
end

local function b64(s)
  local f = os.tmpname()
  h.write(f, s)
  local r = h.must(h.run('base64 -w0 ' .. h.q(f)))
  os.remove(f)
  return r.out
end

-- secret(t, ns, name [, labels [, key]]) -> the Secret: t's kubeconfig held
-- in the management cluster under key (super-admin.conf), labelled as
-- Kamaji labels an admin kubeconfig unless labels says otherwise. t may be
-- a string: the kubeconfig's text itself (a broken one, for a spec).
function M.secret(t, ns, name, labels, key)
  local text = type(t) == 'table' and t.text or t
  local obj = {
    apiVersion = 'v1', kind = 'Secret',
    metadata = { name = name, namespace = ns, labels = labels or { [M.LABEL] = M.LABEL_VALUE } },
    type = 'Opaque',
    data = { [key or M.KEY] = b64(text) },
  }
  h.kapply(obj)
  return obj
end

-- kamaji(t, ns, cluster [, labels]) -> the Secret: t's kubeconfig stored as
-- Kamaji stores a tenant control plane's admin kubeconfig: named
-- <cluster>-admin-kubeconfig, labelled with its project, component and the
-- cluster's name (kamaji.clastix.io/name), plus labels.
function M.kamaji(t, ns, name, labels)
  local l = {
    ['kamaji.clastix.io/project'] = 'kamaji',
    [M.LABEL] = M.LABEL_VALUE,
    ['kamaji.clastix.io/name'] = name,
  }
  for k, v in pairs(labels or {}) do l[k] = v end
  return M.secret(t, ns, name .. '-admin-kubeconfig', l)
end

-- pv(name) -> a PersistentVolume (a table) as a tenant cluster holds one
-- (the CSI driver names it after the claim in the management cluster).
function M.pv(name)
  return {
    apiVersion = 'v1', kind = 'PersistentVolume', metadata = { name = name },
    spec = { capacity = { storage = '1Gi' }, accessModes = { 'ReadWriteOnce' },
      persistentVolumeReclaimPolicy = 'Retain', hostPath = { path = '/tmp/' .. name } },
  }
end

-- volume_tenants() -> foo, bar: the tenants the specs of the volume-label
-- migrations (legacy 4 and 5) walk: foo up, holding volumes pvc-a, pvc-b
-- and tenant-local; bar holding pvc-c, then down (its claim must stay as
-- it is). Started once per run and shared: those migrations only read a
-- tenant (they label claims of the management cluster), so two files
-- need not pay four apiserver starts; stopped when the run ends. Nil
-- when this run has no tenants (available()).
function M.volume_tenants()
  if not M.available() then return nil, nil end
  local r = started()
  if not r.volume_tenants then
    local foo = M.start('foo')
    for _, n in ipairs({ 'pvc-a', 'pvc-b', 'tenant-local' }) do foo.apply(M.pv(n)) end
    local bar = M.start('bar')
    bar.apply(M.pv('pvc-c'))
    bar.stop()
    r.volume_tenants = { foo, bar }
  end
  return r.volume_tenants[1], r.volume_tenants[2]
end

-- pvc(name [, labels]) -> a PersistentVolumeClaim (a table).
function M.pvc(name, labels)
  return {
    apiVersion = 'v1', kind = 'PersistentVolumeClaim', metadata = { name = name, labels = labels },
    spec = { accessModes = { 'ReadWriteOnce' }, resources = { requests = { storage = '1Gi' } } },
  }
end

return M
