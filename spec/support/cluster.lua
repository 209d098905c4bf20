-- Cluster fixtures for specs that run against a real apiserver: the testenv,
-- or any cluster KUBECONFIG names (a kind cluster). Everything goes through
-- kubectl (h.kc), never through the kube module under test.
--
-- CRDs come from spec/fixtures/crds/*.yaml and are applied once per spec
-- file (and waited for until the apiserver serves them); objects come from
-- YAML files and live in namespaces unique to the spec, which this module
-- remembers so that the migration harness can watch them and teardown can
-- remove what they hold. Namespaces never finish deleting on the testenv (no
-- controller-manager), so every name is fresh; and objects left in them
-- would still be visible to a migration that walks every namespace, so
-- purge() deletes them explicitly.
--
-- Failures are made real, never mocked: deny() installs a
-- ValidatingAdmissionPolicy that refuses chosen operations on chosen objects
-- (as an admission webhook or a policy engine would), kubeconfig() writes a
-- kubeconfig for the same cluster under another identity.
local h = require('support.helpers')
local json = require('json')
local yaml = require('yaml')

local M = {}

M.fixtures = h.root .. '/spec/fixtures'

local state = { crds = {}, namespaces = {}, policies = {} }

local function sleep(s) os.execute('sleep ' .. s) end

-- poll(fn, what [, seconds]) retries fn until it returns a truthy value.
local function poll(fn, what, seconds)
  local deadline = os.time() + (seconds or 60)
  local last
  repeat
    local v, why = fn()
    if v then return v end
    last = why
    sleep(0.2)
  until os.time() > deadline
  error(string.format('timed out waiting for %s%s', what, last and (': ' .. tostring(last)) or ''), 2)
end
M.poll = poll

local function warn(fmt, ...)
  io.stderr:write('spec cleanup: ', string.format(fmt, ...), '\n')
end

-- unique([prefix]) -> a DNS-label-safe token no other run shares; only
-- [a-z0-9] after the prefix, so it can sit inside a dash-separated name.
math.randomseed(os.time(), tonumber(tostring({}):match('0x(%x+)'), 16) or 0)
local seq = 0
function M.unique(prefix)
  seq = seq + 1
  local function b36(n)
    local digits, s = '0123456789abcdefghijklmnopqrstuvwxyz', ''
    repeat
      local d = n % 36
      s = digits:sub(d + 1, d + 1) .. s
      n = n // 36
    until n == 0
    return s
  end
  return (prefix or '') .. b36(os.time() % 60466176) .. b36(math.random(0, 46655)) .. b36(seq)
end

local function path_of(file)
  if file:sub(1, 1) == '/' then return file end
  return M.fixtures .. '/' .. file
end

-- ---- CRDs -----------------------------------------------------------------

local function crd_info(file)
  local doc = assert(yaml.decode(h.slurp(file)), 'cannot read CRD ' .. file)
  local v = doc.spec.versions[1].name
  return { name = doc.metadata.name, group = doc.spec.group, version = v,
    plural = doc.spec.names.plural, file = file }
end

local function served(c)
  local res = h.kc(string.format('get --raw /apis/%s/%s', c.group, c.version))
  if res.code ~= 0 then return false, res.err end
  for _, r in ipairs(json.decode(res.out).resources or {}) do
    if r.name == c.plural then return true end
  end
  return false, c.plural .. ' not in the group version yet'
end

-- crds(name...) applies spec/fixtures/crds/<name>.yaml and waits until
-- objects of each can be listed.
function M.crds(...)
  for _, name in ipairs({ ... }) do
    if not state.crds[name] then
      local c = crd_info(path_of('crds/' .. name .. '.yaml'))
      h.must(h.kc('apply -f ' .. h.q(c.file)))
      h.must(h.kc('wait --for condition=established --timeout=60s crd/' .. c.name))
      poll(function() return served(c) end, 'the apiserver to serve ' .. c.name)
      poll(function()
        local r = h.kc(string.format('get %s.%s -A', c.plural, c.group))
        return r.code == 0, r.err
      end, 'a list of ' .. c.name .. ' to succeed')
      state.crds[name] = c
    end
  end
end

-- crd_absent(name) makes sure the API of spec/fixtures/crds/<name>.yaml is
-- not served: deletes the CRD (and with it every object of it, finalizers
-- removed first so none blocks) and waits until discovery drops it.
function M.crd_absent(name)
  local c = crd_info(path_of('crds/' .. name .. '.yaml'))
  state.crds[name] = nil
  if h.kc('get crd ' .. c.name).code == 0 then
    local list = h.kc(string.format('get %s.%s -A -o json', c.plural, c.group))
    if list.code == 0 then
      for _, o in ipairs(json.decode(list.out).items) do
        if o.metadata.finalizers and #o.metadata.finalizers > 0 then
          h.must(h.kc(string.format("patch %s.%s %s -n %s --type=merge -p '{\"metadata\":{\"finalizers\":null}}'",
            c.plural, c.group, o.metadata.name, o.metadata.namespace)))
        end
      end
    end
    h.must(h.kc('delete crd ' .. c.name .. ' --wait=true --timeout=60s'))
  end
  poll(function() return not served(c) end, 'the apiserver to stop serving ' .. c.name)
end

-- ---- namespaces and objects ------------------------------------------------

-- namespace(prefix [, labels]) -> a fresh namespace named prefix-<unique>.
function M.namespace(prefix, labels)
  return M.namespace_named(M.unique(prefix .. '-'), labels)
end

-- namespace_named(name [, labels]) creates exactly that namespace.
function M.namespace_named(name, labels)
  local meta = { name = name, labels = labels or {} }
  meta.labels['cozy-migrate.spec/owned'] = 'true'
  M.apply({ apiVersion = 'v1', kind = 'Namespace', metadata = meta })
  state.namespaces[#state.namespaces + 1] = name
  return name
end

-- namespaces() -> the namespaces this spec file created, in order.
function M.namespaces()
  return table.move(state.namespaces, 1, #state.namespaces, 1, {})
end

-- apply(src [, namespace]) applies a fixture: a file under spec/fixtures, a
-- table (one object), or a list of tables. Objects without a namespace land
-- in `namespace`, and ${NAMESPACE} in a file reads as its name. Server-side,
-- so the objects carry no last-applied annotation a migration would see, and
-- forced, so a fixture can be applied again over what a migration changed.
function M.apply(src, namespace)
  local text
  if type(src) == 'table' then
    local body = src
    if src[1] then body = { apiVersion = 'v1', kind = 'List', items = json.array(src) } end
    text = json.encode(body)
  else
    text = h.slurp(path_of(src))
    assert(text ~= '', 'no fixture ' .. path_of(src))
    if namespace then text = text:gsub('%${NAMESPACE}', (namespace:gsub('%%', '%%%%'))) end
  end
  local file = h.write(os.tmpname() .. '.yaml', text)
  local res = h.kc(string.format('apply --server-side --force-conflicts %s-f %s',
    namespace and ('-n ' .. h.q(namespace) .. ' ') or '', h.q(file)))
  os.remove(file)
  return h.must(res)
end

-- get(resource, name [, namespace]) -> the object as kubectl sees it, or nil.
function M.get(resource, name, namespace)
  local res = h.must(h.kc(string.format('get %s %s %s--ignore-not-found -o json', resource, h.q(name),
    namespace and ('-n ' .. h.q(namespace) .. ' ') or '')))
  if res.out:match('^%s*$') then return nil end
  return json.decode(res.out)
end

-- list(resource, namespace) -> the objects of a resource in one namespace.
function M.list(resource, namespace)
  return h.kc_json(string.format('get %s -n %s', resource, h.q(namespace))).items
end

local function strip_finalizers(resource, o)
  if o.metadata.finalizers and #o.metadata.finalizers > 0 then
    local r = h.kc(string.format("patch %s %s -n %s --type=merge -p '{\"metadata\":{\"finalizers\":null}}'",
      resource, h.q(o.metadata.name), h.q(o.metadata.namespace)))
    if r.code ~= 0 and not r.err:match('NotFound') then warn('%s', r.err) end
  end
end

-- purge(resource...) deletes every object of these resources in this spec's
-- namespaces (finalizers removed first: no controller would ever run them).
function M.purge(...)
  for _, resource in ipairs({ ... }) do
    for _, ns in ipairs(state.namespaces) do
      local list = h.kc(string.format('get %s -n %s -o json', resource, h.q(ns)))
      if list.code == 0 then
        local items = json.decode(list.out).items
        for _, o in ipairs(items) do strip_finalizers(resource, o) end
        if #items > 0 then
          local r = h.kc(string.format('delete %s --all -n %s --wait=false', resource, h.q(ns)))
          if r.code ~= 0 then warn('%s', r.err) end
        end
      end
    end
  end
end

-- ---- failures ---------------------------------------------------------------

local function probe(p)
  local target = p.kind .. ' ' .. h.q(p.name) .. (p.namespace and (' -n ' .. h.q(p.namespace)) or '')
  if p.operation == 'DELETE' then
    return h.kc('delete --dry-run=server ' .. target)
  end
  return h.kc('annotate --dry-run=server --overwrite ' .. target .. ' cozy-migrate.spec/probe=' .. M.unique())
end

-- deny{group=, resource=, operations=, selector=, message=, probe=} installs a
-- ValidatingAdmissionPolicy refusing `operations` (default {'UPDATE'}) on
-- objects of group/resource whose labels match `selector` ({k = v}), and
-- waits until a server-side dry run of probe ({name=, namespace=}, an object
-- the policy covers) is refused. Returns a handle for allow().
function M.deny(o)
  local name = M.unique('cozy-spec-deny-')
  local ops = o.operations or { 'UPDATE' }
  local message = o.message or 'refused by the spec'
  M.apply({
    {
      apiVersion = 'admissionregistration.k8s.io/v1', kind = 'ValidatingAdmissionPolicy',
      metadata = { name = name },
      spec = {
        failurePolicy = 'Fail',
        matchConstraints = { resourceRules = json.array {
          { apiGroups = json.array { o.group or '' }, apiVersions = json.array { '*' },
            resources = json.array { o.resource }, operations = json.array(ops) },
        } },
        validations = json.array { { expression = 'false', message = message, reason = o.reason or 'Forbidden' } },
      },
    },
    {
      apiVersion = 'admissionregistration.k8s.io/v1', kind = 'ValidatingAdmissionPolicyBinding',
      metadata = { name = name },
      spec = {
        policyName = name, validationActions = json.array { 'Deny' },
        matchResources = { objectSelector = { matchLabels = o.selector } },
      },
    },
  })
  local p = {
    name = name, message = message,
    probe = {
      kind = o.resource .. ((o.group and o.group ~= '') and ('.' .. o.group) or ''),
      name = o.probe.name, namespace = o.probe.namespace, operation = ops[1],
    },
  }
  state.policies[name] = p
  poll(function()
    local r = probe(p.probe)
    return r.code ~= 0 and r.err:find(message, 1, true), r.err
  end, 'policy ' .. name .. ' to refuse ' .. p.probe.kind .. ' ' .. p.probe.name)
  return p
end

-- allow(handle) removes a deny() policy and waits until its probe passes.
function M.allow(p)
  h.must(h.kc('delete validatingadmissionpolicybinding,validatingadmissionpolicy ' .. p.name))
  state.policies[p.name] = nil
  poll(function()
    local r = probe(p.probe)
    return r.code == 0 or not r.err:find(p.message, 1, true), r.err
  end, 'policy ' .. p.name .. ' to be lifted')
end

-- kubeconfig{token=} -> the path of a kubeconfig for the same cluster (server
-- and CA of the current context) that presents this bearer token.
function M.kubeconfig(o)
  local view = h.kc_json('config view --raw --minify')
  local cluster = view.clusters[1]
  local cfg = {
    apiVersion = 'v1', kind = 'Config', ['current-context'] = 'spec',
    clusters = json.array { cluster },
    users = json.array { { name = 'spec', user = { token = o.token } } },
    contexts = json.array { { name = 'spec', context = { cluster = cluster.name, user = 'spec' } } },
  }
  return h.write(h.tmpdir() .. '/kubeconfig', json.encode(cfg))
end

-- cleanup(resource...) lifts every policy still in place, purges the given
-- resources and deletes this spec's namespaces (without waiting: on the
-- testenv they never finish).
function M.cleanup(...)
  for _, p in pairs(state.policies) do
    local r = h.kc('delete validatingadmissionpolicybinding,validatingadmissionpolicy ' .. p.name)
    if r.code ~= 0 then warn('%s', r.err) end
  end
  state.policies = {}
  M.purge(...)
  if #state.namespaces > 0 then
    local r = h.kc('delete namespace --wait=false ' .. table.concat(state.namespaces, ' '))
    if r.code ~= 0 then warn('%s', r.err) end
  end
  state.namespaces = {}
end

return M
