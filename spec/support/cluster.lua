-- Cluster fixtures for specs that run against a real apiserver: the testenv,
-- or any disposable cluster KUBECONFIG names (a kind cluster; see
-- support.disposable). Everything goes through kubectl (h.kc), never
-- through the kube module under test.
--
-- CRDs come from spec/fixtures/crds/*.yaml and are created once per run
-- where the cluster has none (and waited for until the apiserver serves
-- them); objects come from YAML files and live in namespaces unique to the
-- spec, which this module remembers so that the migration harness can watch
-- them and teardown can remove what they hold. Namespaces never finish
-- deleting on the testenv (no controller-manager), so every name is fresh;
-- and objects left in them would still be visible to a migration that walks
-- every namespace, so purge() deletes them explicitly.
--
-- Safe by construction: what this run creates carries the label
-- cozy-migrate.spec/run=<the run's id> (objects inside this run's
-- namespaces are its own with them), and nothing else is ever deleted,
-- stripped of finalizers or overwritten. A CRD the cluster already has is
-- checked against the fixture, never replaced: crds() fails naming each
-- difference the spec would trip over. An "API absent" case deletes only a
-- CRD this run created (crd_absent), and is pending, saying why, on a
-- cluster that serves the API itself. At the end of the run the CRDs it
-- created are removed again.
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

-- The label every object this run creates outside its own namespaces (and
-- those namespaces themselves) carries: its value is the run's id.
M.RUN_LABEL = 'cozy-migrate.spec/run'

local state = { crds = {}, namespaces = {}, policies = {} }

-- This run, shared by every spec file: its id, the namespaces and CRDs it
-- created (by name), and whether the end-of-run cleanup is registered.
local function run()
  local r = h.this_run()
  if not r.id then
    -- outside `cozy-migrate spec` (no run table): one id for this process
    r.id = string.format('%08x%08x', os.time() & 0xffffffff, math.random(0, 0x7fffffff))
  end
  r.namespaces = r.namespaces or {}
  r.crds = r.crds or {}
  return r
end
M.run_id = function() return run().id end

-- ours(obj) -> whether this run created obj: labelled with its id, or in a
-- namespace it created.
local function ours(obj)
  local meta = obj.metadata or {}
  if (meta.labels or {})[M.RUN_LABEL] == run().id then return true end
  return meta.namespace ~= nil and run().namespaces[meta.namespace] == true
end
M.ours = ours

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
    plural = doc.spec.names.plural, file = file, doc = doc }
end

local function served(c)
  local res = h.kc(string.format('get --raw /apis/%s/%s', c.group, c.version))
  if res.code ~= 0 then return false, res.err end
  for _, r in ipairs(json.decode(res.out).resources or {}) do
    if r.name == c.plural then return true end
  end
  return false, c.plural .. ' not in the group version yet'
end

-- get_crd(name) -> the CRD as the cluster holds it, or nil.
local function get_crd(name)
  local r = h.must(h.kc('get crd ' .. h.q(name) .. ' --ignore-not-found -o json'))
  if r.out:match('^%s*$') then return nil end
  return json.decode(r.out)
end

local function preserves(node)
  return type(node) == 'table' and node['x-kubernetes-preserve-unknown-fields'] == true
end

-- schema_gaps(want, have, at, out): where the served schema `have` would
-- not keep what the fixture's schema `want` keeps.
local function schema_gaps(want, have, at, out)
  if type(want) ~= 'table' then return end
  if type(have) ~= 'table' then
    out[#out + 1] = at .. ': not in the served schema'
    return
  end
  if want.type and have.type and want.type ~= have.type then
    out[#out + 1] = string.format('%s: type %s, the fixture has %s', at, have.type, want.type)
  end
  if preserves(want) and not preserves(have) then
    out[#out + 1] = at .. ': the fixture keeps unknown fields here (x-kubernetes-preserve-unknown-fields), ' ..
      'the served schema prunes them'
  end
  for k, sub in pairs(want.properties or {}) do
    local there = (have.properties or {})[k]
    if there == nil and not preserves(have) then
      out[#out + 1] = at .. '.' .. k .. ': not in the served schema'
    elseif there ~= nil then
      schema_gaps(sub, there, at .. '.' .. k, out)
    end
  end
  if want.items then schema_gaps(want.items, have.items, at .. '[]', out) end
end

-- crd_gaps(fixture, served) -> sorted lines: what the spec needs of the
-- fixture CRD that the served one lacks (its group, names and scope; each
-- of its versions served, with its status subresource and every field its
-- schema keeps).
function M.crd_gaps(want, have)
  local out = {}
  local ws, hs = want.spec or {}, have.spec or {}
  if ws.group ~= hs.group then out[#out + 1] = string.format('group %s, the fixture has %s', hs.group, ws.group) end
  if ws.scope ~= hs.scope then out[#out + 1] = string.format('scope %s, the fixture has %s', hs.scope, ws.scope) end
  for _, k in ipairs({ 'kind', 'plural' }) do
    local a, b = (ws.names or {})[k], (hs.names or {})[k]
    if a ~= b then out[#out + 1] = string.format('names.%s %s, the fixture has %s', k, tostring(b), tostring(a)) end
  end
  local versions = {}
  for _, v in ipairs(hs.versions or {}) do versions[v.name] = v end
  for _, w in ipairs(ws.versions or {}) do
    local v = versions[w.name]
    if not v then
      out[#out + 1] = string.format('version %s: not in the served CRD', w.name)
    elseif not v.served then
      out[#out + 1] = string.format('version %s: not served', w.name)
    else
      if (w.subresources or {}).status and not (v.subresources or {}).status then
        out[#out + 1] = string.format('version %s: no status subresource (the fixture has one)', w.name)
      end
      schema_gaps((w.schema or {}).openAPIV3Schema, (v.schema or {}).openAPIV3Schema,
        'version ' .. w.name .. ': openAPIV3Schema', out)
    end
  end
  table.sort(out)
  return out
end

-- The end of the run removes the CRDs it created, so the next run (and
-- the cluster's owner) finds the cluster as it was. Registered once a
-- run, on busted's exit event.
local function clean_at_exit()
  local r = run()
  if r.crd_cleanup then return end
  local ok, busted = pcall(require, 'busted')
  if not ok or type(busted) ~= 'table' or not busted.subscribe then return end
  r.crd_cleanup = true
  busted.subscribe({ 'exit' }, function()
    for name in pairs(r.crds) do
      local okc, err = pcall(M.remove_crd, name, false)
      if not okc then io.stderr:write('spec cleanup: ', tostring(err), '\n') end
    end
    return nil, true
  end)
end

local function wait_served(c)
  h.must(h.kc('wait --for condition=established --timeout=60s crd/' .. c.name))
  poll(function() return served(c) end, 'the apiserver to serve ' .. c.name)
  poll(function()
    local r = h.kc(string.format('get %s.%s -A', c.plural, c.group))
    return r.code == 0, r.err
  end, 'a list of ' .. c.name .. ' to succeed')
end

-- crds(name...) makes the API of each spec/fixtures/crds/<name>.yaml
-- served: creates the CRD (labelled as this run's) where the cluster has
-- none, and otherwise checks that the one it serves has what the fixture
-- has (crd_gaps), failing with the differences: a CRD this run did not
-- create is never changed. Waits until objects of each can be listed.
function M.crds(...)
  for _, name in ipairs({ ... }) do
    if not state.crds[name] then
      local c = crd_info(path_of('crds/' .. name .. '.yaml'))
      local have = get_crd(c.name)
      if have and have.metadata.deletionTimestamp then
        -- being deleted by someone (an earlier spec's teardown): let it go
        poll(function() return get_crd(c.name) == nil end, 'CRD ' .. c.name .. ' to finish deleting')
        have = nil
      end
      if not have then
        local doc = json.decode(json.encode(c.doc))
        doc.metadata.labels = doc.metadata.labels or {}
        doc.metadata.labels[M.RUN_LABEL] = run().id
        local f = h.write(os.tmpname() .. '.json', json.encode(doc))
        local r = h.kc('create -f ' .. h.q(f))
        os.remove(f)
        if r.code ~= 0 and r.err:find('AlreadyExists', 1, true) then
          have = get_crd(c.name) -- created meanwhile: judge it like any other
        else
          h.must(r, 'create CRD ' .. c.name)
          run().crds[c.name] = true
          clean_at_exit()
        end
      end
      if have then
        local gaps = M.crd_gaps(c.doc, have)
        if #gaps > 0 then
          error(string.format('the cluster\'s CRD %s differs from %s where the spec needs it, and the harness ' ..
            'never changes a CRD it did not create (run against a cluster without it, or one whose CRD has ' ..
            'this):\n  %s', c.name, c.file, table.concat(gaps, '\n  ')), 2)
        end
      end
      wait_served(c)
      state.crds[name] = c
    end
  end
end

-- Strips the finalizers of every object of CRD c this run may touch (in
-- its namespaces, or labelled as its own); raises naming any other object
-- that has finalizers, which would keep the CRD from going.
local function release_objects(c)
  local list = h.kc(string.format('get %s.%s -A -o json', c.plural, c.group))
  if list.code ~= 0 then return end
  local blocked = {}
  for _, o in ipairs(json.decode(list.out).items) do
    local m = o.metadata
    if m.finalizers and #m.finalizers > 0 then
      if ours(o) then
        local r = h.kc(string.format("patch %s.%s %s %s--type=merge -p '{\"metadata\":{\"finalizers\":null}}'",
          c.plural, c.group, h.q(m.name), m.namespace and ('-n ' .. h.q(m.namespace) .. ' ') or ''))
        if r.code ~= 0 and not r.err:match('NotFound') then warn('%s', r.err) end
      else
        blocked[#blocked + 1] = (m.namespace and (m.namespace .. '/') or '') .. m.name
      end
    end
  end
  if #blocked > 0 then
    error(string.format('CRD %s holds objects with finalizers this run did not create (%s): the harness ' ..
      'never strips them, so it leaves the CRD', c.name, table.concat(blocked, ', ')), 0)
  end
end

-- remove_crd(name, wait) deletes CRD `name` if this run created it (its
-- objects' finalizers stripped first, if this run's): true; false when it
-- is not this run's (left as it is).
function M.remove_crd(name, wait)
  local have = get_crd(name)
  if not have then run().crds[name] = nil return true end
  if ((have.metadata.labels or {})[M.RUN_LABEL]) ~= run().id then return false end
  local c = { name = name, group = have.spec.group, plural = have.spec.names.plural,
    version = have.spec.versions[1].name }
  release_objects(c)
  h.must(h.kc('delete crd ' .. h.q(name) .. (wait and ' --wait=true --timeout=60s' or ' --wait=false')))
  run().crds[name] = nil
  if wait then poll(function() return not served(c) end, 'the apiserver to stop serving ' .. name) end
  return true
end

-- crd_absent(name) -> true when the API of spec/fixtures/crds/<name>.yaml
-- is not served (deleting the CRD if, and only if, this run created it);
-- false, why when the cluster serves it from a CRD this run did not create:
-- the case that needs it absent cannot run there (migration.common marks
-- it pending with why).
function M.crd_absent(name)
  local c = crd_info(path_of('crds/' .. name .. '.yaml'))
  state.crds[name] = nil
  local have = get_crd(c.name)
  if have and not have.metadata.deletionTimestamp and not M.remove_crd(c.name, true) then
    local by = (have.metadata.labels or {})[M.RUN_LABEL]
    return false, string.format('the cluster serves %s from a CRD %s, and the harness never deletes ' ..
      'what it did not create: this case runs on a cluster without it (a fresh testenv or kind cluster)',
      c.name, by and ('an earlier spec run (' .. by .. ') left') or 'this run did not create')
  end
  poll(function() return get_crd(c.name) == nil end, 'CRD ' .. c.name .. ' to be gone')
  poll(function() return not served(c) end, 'the apiserver to stop serving ' .. c.name)
  return true
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
  meta.labels[M.RUN_LABEL] = run().id
  M.apply({ apiVersion = 'v1', kind = 'Namespace', metadata = meta })
  run().namespaces[name] = true
  state.namespaces[#state.namespaces + 1] = name
  return name
end

-- namespaces() -> the namespaces this spec file created, in order.
function M.namespaces()
  return table.move(state.namespaces, 1, #state.namespaces, 1, {})
end

-- items(out) -> the objects of kubectl's -o json output (one, or a List).
local function items(out)
  if out:match('^%s*$') then return {} end
  local d = json.decode(out)
  if d.kind == 'List' or (d.items and not d.metadata) or (d.items and d.kind and d.kind:match('List$')) then
    return d.items or {}
  end
  return { d }
end

local function who(o)
  local m = o.metadata or {}
  return string.format('%s %s%s', o.kind or '?', m.namespace and (m.namespace .. '/') or '', m.name or '?')
end

-- apply(src [, namespace]) applies a fixture: a file under spec/fixtures, a
-- table (one object), or a list of tables. Objects without a namespace land
-- in `namespace`, and ${NAMESPACE} in a file reads as its name. Server-side,
-- so the objects carry no last-applied annotation a migration would see, and
-- forced, so a fixture can be applied again over what a migration changed.
-- Only over what this run created: an object that exists and is not this
-- run's (ours()) is refused, naming it, before anything is sent; one it
-- creates outside its namespaces is labelled as this run's.
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
  local nsflag = namespace and ('-n ' .. h.q(namespace) .. ' ') or ''
  local existing = {}
  local got = h.kc(string.format('get %s--ignore-not-found -o json -f %s', nsflag, h.q(file)))
  if got.code == 0 then
    for _, o in ipairs(items(got.out)) do
      if not ours(o) then
        os.remove(file)
        error(string.format('cluster.apply: %s exists and this spec run did not create it: the harness ' ..
          'never overwrites what it did not create (use a namespace of the spec, cluster.namespace())',
          who(o)), 2)
      end
      existing[who(o)] = true
    end
  end
  local res = h.kc(string.format('apply --server-side --force-conflicts -o json %s-f %s', nsflag, h.q(file)))
  os.remove(file)
  h.must(res)
  for _, o in ipairs(items(res.out)) do
    if not existing[who(o)] and not ours(o) then
      local m = o.metadata
      h.must(h.kc(string.format('label %s%s %s %s%s=%s --overwrite', o.kind,
        (o.apiVersion or ''):find('/', 1, true) and ('.' .. o.apiVersion:match('^([^/]+)/')) or '',
        h.q(m.name), m.namespace and ('-n ' .. h.q(m.namespace) .. ' ') or '', M.RUN_LABEL, run().id)))
    end
  end
  return res
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
  return require('support.disposable').derived(h.write(h.tmpdir() .. '/kubeconfig', json.encode(cfg)))
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
